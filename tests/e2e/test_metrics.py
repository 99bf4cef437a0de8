"""Metrics as an operator reads them: the gateway's ``/metrics`` (parsed with prometheus_client's parser), the
stand-in's CloudWatch (boto3), and each storage worker's admin listener, against a stack of two partitions
whose depth collector and CloudWatch publisher run every second or faster.

Known counts go in through real SQS clients on both protocols, each run on queues of its own; the figures
are read back once the collector and the publisher have caught up with them.
"""

from __future__ import annotations

import datetime
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ferrymq.message_size import message_bytes
from tests.e2e.conftest import Stack
from tests.support.sqs_clients import sqs_client
from tests.support.stack import started
from tests.support.waiting import wait_for

METRICS_ENV = {
    "FERRYMQ_PARTITIONS": "2",
    "FERRYMQ_METRICS_COLLECT_SECONDS": "0.5",
    "FERRYMQ_CLOUDWATCH_PUBLISH_SECONDS": "1",
}
ACCOUNT = "000000000000"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def metrics_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from started(Path(tmp_path_factory.mktemp("metrics")), METRICS_ENV)


@pytest.fixture(params=["json", "query"])
def client(metrics_stack: Stack, request: pytest.FixtureRequest) -> Any:
    return sqs_client(metrics_stack.endpoint, request.param, access_key=metrics_stack.access_key,
                      secret_key=metrics_stack.secret_key, region=metrics_stack.region)


def get(url: str, method: str = "GET") -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def scrape(url: str) -> Samples:
    status, body = get(url)
    assert status == 200, body
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def of_queue(name: str) -> frozenset[tuple[str, str]]:
    return frozenset({"queue": name, "account": ACCOUNT, "region": "us-east-1"}.items())


def statistics(cloudwatch: Any, metric: str, queue: str, since: datetime.datetime, *statistic: str) -> list[dict]:
    return cloudwatch.get_metric_statistics(
        Namespace="AWS/SQS", MetricName=metric, Dimensions=[{"Name": "QueueName", "Value": queue}],
        StartTime=since, EndTime=since + datetime.timedelta(minutes=30), Period=60, Statistics=list(statistic),
    )["Datapoints"]


def total(cloudwatch: Any, metric: str, queue: str, since: datetime.datetime, statistic: str = "Sum") -> float:
    return sum(point[statistic] for point in statistics(cloudwatch, metric, queue, since, statistic))


def test_known_counts_come_back_from_metrics_and_cloudwatch(metrics_stack: Stack, client: Any) -> None:
    since = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=1)
    # given a queue spread over both partitions, and an idle one
    name = f"metrics-{uuid.uuid4().hex[:10]}"
    url = client.create_queue(QueueName=name, Attributes={"FerryMQShardCount": "2"})["QueueUrl"]
    idle = f"{name}-idle"
    idle_url = client.create_queue(QueueName=idle)["QueueUrl"]
    # when 7 messages are sent (3 alone, 4 in a batch), one with attributes
    bodies = ["a", "bb" * 50, "ccc", "d", "é" * 40, "ffff", "g" * 700]
    attributes = {"kind": {"DataType": "String", "StringValue": "test"}}
    client.send_message(QueueUrl=url, MessageBody=bodies[0], MessageAttributes=attributes)
    for body in bodies[1:3]:
        client.send_message(QueueUrl=url, MessageBody=body)
    client.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": b} for i, b in
                                                     enumerate(bodies[3:])])
    sizes = [message_bytes(bodies[0], attributes), *(message_bytes(b) for b in bodies[1:])]
    # and 5 are received (counting the receives that found nothing), 3 of them deleted
    received: list[dict[str, Any]] = []
    empty = 0
    while len(received) < 5:
        got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=5 - len(received), VisibilityTimeout=600,
                                     WaitTimeSeconds=1).get("Messages", [])
        empty += not got
        received += got
    client.delete_message(QueueUrl=url, ReceiptHandle=received[0]["ReceiptHandle"])
    client.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                       for i, m in enumerate(received[1:3])])
    # and the idle queue is polled twice in vain
    for _ in range(2):
        assert "Messages" not in client.receive_message(QueueUrl=idle_url, WaitTimeSeconds=0)

    # then the gateway's /metrics counts them, per queue, not per shard
    metrics_url = f"{metrics_stack.endpoint}/metrics"
    queue = of_queue(name)
    counts = scrape(metrics_url)
    assert counts[("ferrymq_queue_messages_sent_total", queue)] == 7
    assert counts[("ferrymq_queue_messages_received_total", queue)] == 5
    assert counts[("ferrymq_queue_messages_deleted_total", queue)] == 3
    assert counts[("ferrymq_queue_empty_receives_total", queue)] == empty
    assert counts[("ferrymq_queue_empty_receives_total", of_queue(idle))] == 2
    assert counts[("ferrymq_queue_sent_message_size_bytes_count", queue)] == 7
    assert counts[("ferrymq_queue_sent_message_size_bytes_sum", queue)] == sum(sizes)
    # and the latency histograms counted the requests by action and outcome
    assert counts[("ferrymq_request_duration_seconds_count",
                   frozenset({"action": "SendMessageBatch", "code": "OK"}.items()))] >= 1
    # and, once the collector has asked the workers, the depths add up over the shards
    depth = wait_for(lambda: (s := scrape(metrics_url)).get(("ferrymq_queue_messages_in_flight", queue)) == 2
                     and s.get(("ferrymq_queue_messages_visible", queue)) == 2 and s)
    assert depth[("ferrymq_queue_messages_delayed", queue)] == 0
    assert depth[("ferrymq_queue_oldest_message_age_seconds", queue)] >= 0
    assert depth[("ferrymq_queue_messages_visible", of_queue(idle))] == 0

    # and the stand-in's CloudWatch has the same figures as AWS/SQS metrics by QueueName
    cloudwatch = metrics_stack.aws_client("cloudwatch")
    wait_for(lambda: total(cloudwatch, "NumberOfMessagesDeleted", name, since) == 3)
    assert total(cloudwatch, "NumberOfMessagesSent", name, since) == 7
    assert total(cloudwatch, "NumberOfMessagesReceived", name, since) == 5
    assert total(cloudwatch, "NumberOfEmptyReceives", name, since) == empty
    wait_for(lambda: total(cloudwatch, "NumberOfEmptyReceives", idle, since) == 2)
    assert total(cloudwatch, "SentMessageSize", name, since, "SampleCount") == 7
    assert total(cloudwatch, "SentMessageSize", name, since) == sum(sizes)
    assert max(p["Maximum"] for p in statistics(cloudwatch, "SentMessageSize", name, since, "Maximum")) == max(sizes)
    # and the depths published since they settled are those of the queue now
    # (the stand-in drops StartTime's fraction of a second: start at the next whole one, so that no point
    # published just before the depths settled is read)
    settled = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1)).replace(microsecond=0)
    for metric, expected in (("ApproximateNumberOfMessagesVisible", 2), ("ApproximateNumberOfMessagesNotVisible", 2),
                             ("ApproximateNumberOfMessagesDelayed", 0)):
        points = wait_for(lambda metric=metric: statistics(cloudwatch, metric, name, settled, "Minimum", "Maximum"))
        assert {(p["Minimum"], p["Maximum"]) for p in points} == {(expected, expected)}, metric
    assert statistics(cloudwatch, "ApproximateAgeOfOldestMessage", name, since, "Maximum")


def admin_addresses(stack: Stack) -> dict[str, str]:
    """Each worker's admin listener, as ``ferrymq cluster status`` finds it in the workers registry."""
    status = json.loads(stack.ferrymq("cluster", "status", "--json"))
    # Each answering worker lists its recent stalls (none, or each with where its loop's thread was meanwhile).
    assert all({"held_ms", "on_cpu_ms", "waiting_for_cpu_ms", "asleep_ms"} <= set(stall)
               for w in status["workers"] for stall in w["recent_stalls"]), status
    return {w["worker_id"]: w["admin"] for w in status["workers"]}


def test_each_worker_serves_its_health_checks_and_metrics(metrics_stack: Stack) -> None:
    # given a little traffic, so that every leader has appended and synced records
    sqs = sqs_client(metrics_stack.endpoint, "json", region=metrics_stack.region)
    url = sqs.create_queue(QueueName=f"workers-{uuid.uuid4().hex[:8]}",
                           Attributes={"FerryMQShardCount": "2"})["QueueUrl"]
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(10)])
    # when each worker's admin listener, as registered, is asked
    admins = admin_addresses(metrics_stack)
    assert sorted(admins) == ["worker-0", "worker-1", "worker-2"] and all(admins.values())
    roles: dict[str, float] = {"leader": 0, "follower": 0}
    synced = 0.0
    for address in admins.values():
        base = f"http://{address}"
        # then it is live, and ready with each of the two partitions led or followed
        assert get(f"{base}/health/live") == (200, b'{"status":"live"}')
        status, body = get(f"{base}/health/ready")
        ready = json.loads(body)
        assert status == 200, ready
        partitions = ready["checks"]["partitions"]
        assert sorted(partitions) == ["0", "1"], ready
        assert all(p == "leading" or p.startswith("following 127.0.0.1:") for p in partitions.values()), ready
        # and its metrics say what it holds
        samples = scrape(f"{base}/metrics")
        assert samples[("ferrymq_worker_ready", frozenset())] == 1
        for role in roles:
            roles[role] += samples[("ferrymq_worker_partitions", frozenset({("role", role)}))]
        assert all(samples[("ferrymq_worker_log_bytes", frozenset({("partition", p)}))] > 0 for p in "01")
        assert ("ferrymq_worker_requests_in_flight", frozenset()) in samples
        # and what its message bodies cost: the bytes kept in memory, what the cache answered, what was read back
        assert samples[("ferrymq_worker_body_cache_bytes", frozenset())] >= 0
        assert ("ferrymq_worker_body_cache_hits_total", frozenset()) in samples
        assert ("ferrymq_worker_body_reads_total", frozenset()) in samples
        # and its checkpoints taken while serving, put in place or dropped
        assert samples[("ferrymq_worker_checkpoints_total", frozenset({("result", "written")}))] >= 0
        assert ("ferrymq_worker_checkpoints_total", frozenset({("result", "dropped")})) in samples
        synced += samples[("ferrymq_worker_fsync_seconds_count", frozenset())]
        # and where its commits were synced: on its event loop, and how many syncs were slow
        assert ("ferrymq_worker_syncs_on_loop_total", frozenset()) in samples
        assert ("ferrymq_worker_slow_syncs_total", frozenset()) in samples
        # and how late its event loop woke, sampled many times a second since it started
        assert samples[("ferrymq_worker_loop_lag_seconds_count", frozenset())] > 10
        assert samples[("ferrymq_worker_loop_lag_worst_seconds", frozenset())] >= 0
        # and how long its loop's thread waited for a CPU, as the kernel counts it
        assert samples[("ferrymq_worker_loop_cpu_wait_seconds_total", frozenset())] >= 0
        # and every follower of a partition it leads catches up: its lag comes down to no record
        led = [p for p, state in partitions.items() if state == "leading"]
        for partition in led:
            def lags(partition: str = partition, base: str = base) -> dict[str, float]:
                return {dict(labels)["follower"]: value for (name, labels), value in scrape(f"{base}/metrics").items()
                        if name == "ferrymq_worker_replication_lag_records" and ("partition", partition) in labels}
            wait_for(lambda lags=lags: (found := lags()) and len(found) == 2 and set(found.values()) == {0})
    # and across the cluster each partition has one leader and two followers
    assert roles == {"leader": 2, "follower": 4}
    assert synced > 0


def test_the_admin_listener_serves_nothing_else(metrics_stack: Stack) -> None:
    address = next(iter(admin_addresses(metrics_stack).values()))
    assert get(f"http://{address}/")[0] == 404
    assert get(f"http://{address}/health")[0] == 404
    assert get(f"http://{address}/metrics", method="POST")[0] == 405
