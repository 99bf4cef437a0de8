"""Several storage clusters behind one endpoint: ``ferrymq up`` with ``FERRYMQ_CLUSTERS=2``, each cluster one
worker (replication factor 1, to keep the test light) and two partitions, and room for three queues each.

New queues go to the cluster with the most room, each cluster's queues work, a create past every cluster's
capacity is refused with OverLimit and writes nothing, and a deleted queue gives its room back.

Last, one worker hangs (SIGSTOP): requests for the other cluster's queue go on as before, while a flood of
requests for the hung worker's queue is answered ServiceUnavailable instead of piling up (bulkheads and a
circuit breaker per worker). The latencies before and during the hang are printed, not asserted.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.e2e.conftest import Stack
from tests.e2e.test_health import probe
from tests.fault.test_add_worker import environment_of
from tests.fault.test_failover import worker_pids
from tests.support.sqs_clients import sqs_client
from tests.support.stack import started

CLUSTER_ENV = {
    "FERRYMQ_CLUSTERS": "2",
    "FERRYMQ_WORKERS": "1",
    "FERRYMQ_REPLICATION_FACTOR": "1",
    "FERRYMQ_PARTITIONS": "2",
    "FERRYMQ_CLUSTER_MAX_QUEUES": "3",
    "FERRYMQ_LEADER_LEASE_SECONDS": "2",
    "FERRYMQ_WORKER_REQUEST_TIMEOUT_SECONDS": "2",
    "FERRYMQ_LEADER_HANDOVER_SECONDS": "0",
}


@pytest.fixture(scope="module")
def two_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from started(Path(tmp_path_factory.mktemp("two-clusters")), CLUSTER_ENV)


def queues_per_cluster(stack: Stack) -> dict[str, tuple[int, int]]:
    """Cluster -> (queues placed on it, its capacity), as ``ferrymq cluster status`` shows them."""
    report = json.loads(stack.ferrymq("cluster", "status", "--json"))
    return {c["cluster"]: (c["queues"], c["max_queues"]) for c in report["clusters"]}


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_queues_spread_over_clusters_up_to_their_capacity(two_clusters: Stack, protocol: str) -> None:
    sqs = sqs_client(two_clusters.endpoint, protocol, access_key=two_clusters.access_key,
                     secret_key=two_clusters.secret_key, region=two_clusters.region)
    names = [f"spread-{protocol}-{i}" for i in range(3)]
    urls = [sqs.create_queue(QueueName=name)["QueueUrl"] for name in names]
    # every queue works wherever it went
    for url in urls:
        sqs.send_message(QueueUrl=url, MessageBody=f"to {url}")
    for url in urls:
        got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
        assert [m["Body"] for m in got] == [f"to {url}"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    # and each went to the emptier cluster: both clusters took some
    counts = queues_per_cluster(two_clusters)
    assert sorted(n for n, _ in counts.values()) == [1, 2]
    for url in urls:
        sqs.delete_queue(QueueUrl=url)
    assert queues_per_cluster(two_clusters) == {"local": (0, 3), "local-1": (0, 3)}


def test_a_create_past_every_clusters_capacity_is_refused_and_a_delete_gives_room_back(two_clusters: Stack) -> None:
    sqs = sqs_client(two_clusters.endpoint, "json", access_key=two_clusters.access_key,
                     secret_key=two_clusters.secret_key, region=two_clusters.region)
    urls = [sqs.create_queue(QueueName=f"fill-{i}")["QueueUrl"] for i in range(6)]
    # when both clusters are full, a seventh queue is refused, in either protocol, and nothing is written
    for protocol in ("json", "query"):
        client = sqs_client(two_clusters.endpoint, protocol, access_key=two_clusters.access_key,
                            secret_key=two_clusters.secret_key, region=two_clusters.region)
        with pytest.raises(ClientError) as refused:
            client.create_queue(QueueName="one-too-many")
        error = refused.value.response
        assert error["Error"]["Code"] == "OverLimit"
        assert error["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert "one-too-many" not in json.dumps(sqs.list_queues())
    # and the status shows both clusters full
    assert queues_per_cluster(two_clusters) == {"local": (3, 3), "local-1": (3, 3)}
    # when a queue is deleted, its room is free again
    sqs.delete_queue(QueueUrl=urls[0])
    urls[0] = sqs.create_queue(QueueName="one-too-many")["QueueUrl"]
    for url in urls:
        sqs.delete_queue(QueueUrl=url)


def partitions_of_queues(stack: Stack) -> dict[str, int]:
    """Queue name -> partition, read from the catalog with the credentials the stack gives its workers."""
    env = environment_of(next(iter(worker_pids(stack).values())))
    dynamodb = boto3.client(
        "dynamodb", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=stack.region,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    prefix = env.get("FERRYMQ_TABLE_PREFIX", "ferrymq-")
    items = dynamodb.scan(TableName=f"{prefix}queues")["Items"]
    return {i["name"]["S"]: int(i["partition"]["N"]) for i in items if "queue_id" in i and "deleted_at" not in i}


def timed_round_trip(sqs: Any, url: str) -> float:
    started = time.perf_counter()
    sqs.send_message(QueueUrl=url, MessageBody="x")
    for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return time.perf_counter() - started


def test_a_hung_worker_holds_up_only_its_own_queues(two_clusters: Stack) -> None:
    sqs = sqs_client(two_clusters.endpoint, "json", access_key=two_clusters.access_key,
                     secret_key=two_clusters.secret_key, region=two_clusters.region)
    # given a queue on each cluster (the first on the emptier one, "local", whose only worker is worker-0)
    assert queues_per_cluster(two_clusters) == {"local": (0, 3), "local-1": (0, 3)}
    hung_url, healthy_url = (sqs.create_queue(QueueName=f"iso-{i}")["QueueUrl"] for i in range(2))
    where = partitions_of_queues(two_clusters)
    assert where["iso-0"] in (0, 1) and where["iso-1"] in (2, 3), where
    before = [timed_round_trip(sqs, healthy_url) for _ in range(60)]

    pid = worker_pids(two_clusters)["worker-0"]
    os.kill(pid, signal.SIGSTOP)
    try:
        def flood(_: int) -> str:
            try:
                sqs.send_message(QueueUrl=hung_url, MessageBody="into the void")
                return "sent"
            except ClientError as exc:
                return f"{exc.response['ResponseMetadata']['HTTPStatusCode']} {exc.response['Error']['Code']}"

        with ThreadPoolExecutor(48) as pool:
            flooding = [pool.submit(flood, i) for i in range(96)]
            time.sleep(0.5)
            during = [timed_round_trip(sqs, healthy_url) for _ in range(60)]
            outcomes = [f.result(timeout=120) for f in flooding]
        # and the gateway says it is not ready, naming the hung worker's partitions
        status, ready = probe(two_clusters, "/health/ready")
        assert status == 503 and ready["status"] == "unready", ready
        assert [p for p, state in ready["checks"]["partitions"].items() if state != "ok"] == ["0", "1"], ready
    finally:
        os.kill(pid, signal.SIGCONT)
    print(f"\nhealthy queues' send+receive+delete: before p50 {statistics.median(before) * 1000:.1f} ms, "
          f"max {max(before) * 1000:.1f} ms; with a worker hung and flooded p50 "
          f"{statistics.median(during) * 1000:.1f} ms, max {max(during) * 1000:.1f} ms")
    print(f"flood on the hung worker's queue: {sorted(set(outcomes))}")
    # every request for the other workers' queues succeeded (timed_round_trip raises otherwise), and every
    # request for the hung worker's queue was answered, as a retryable service-side failure
    assert len(during) == 60
    assert set(outcomes) == {"503 ServiceUnavailable"}
    # and once the worker is back, its queue works again
    deadline = time.monotonic() + 30
    while True:
        try:
            timed_round_trip(sqs, hung_url)
            break
        except ClientError:
            assert time.monotonic() < deadline, "the hung worker's queue did not come back"
            time.sleep(0.5)
    # and the gateway is ready again
    while probe(two_clusters, "/health/ready")[0] != 200:
        assert time.monotonic() < deadline, probe(two_clusters, "/health/ready")
        time.sleep(0.5)
