"""The stack comes up the way a user starts it, and an unmodified boto3 SQS client can talk to it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3

from tests.e2e.conftest import Stack
from tests.support.processes import group_members
from tests.support.sqs_clients import sqs_client


def test_boto3_lists_queues_on_a_fresh_stack(stack: Any) -> None:
    # given the stack started by `ferrymq up` and a plain boto3 client with the printed settings
    client = boto3.client(
        "sqs",
        endpoint_url=stack.endpoint,
        region_name=stack.region,
        aws_access_key_id=stack.access_key,
        aws_secret_access_key=stack.secret_key,
    )
    # when it lists queues
    response = client.list_queues()
    # then the gateway answers successfully
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200


def _stack_processes(stack: Stack) -> list[str]:
    """The command lines of the processes in the stack's process group."""
    assert stack.process is not None
    return [" ".join(argv) for argv in group_members(stack.process.pid).values()]


def test_a_stack_of_three_partitions_runs_a_cluster_of_three_workers_each_leading_one(tmp_path: Path) -> None:
    # given `ferrymq up` with three partitions (three workers, replication factor 3 by default)
    stack = Stack(tmp_path / "ferrymq", {"FERRYMQ_PARTITIONS": "3"})
    try:
        stack.start()
        client = sqs_client(stack.endpoint, "json")
        # when forty queues are made (queue ids spread over the partitions: each partition gets some but with
        # odds below one in a million), and each gets a message
        workers = [c for c in _stack_processes(stack) if "ferrymq.storage" in c]
        for i in range(40):
            url = client.create_queue(QueueName=f"spread-{i}")["QueueUrl"]
            client.send_message(QueueUrl=url, MessageBody=f"body {i}")
            got = client.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
            # then every message comes back from its queue
            assert [m["Body"] for m in got] == [f"body {i}"]
        # and three storage workers hold a replica of every partition, each in a log directory of its own
        assert len(workers) == 3, workers
        assert all("--partitions 0,1,2" in w for w in workers)
        for worker in ("worker-0", "worker-1", "worker-2"):
            directory = stack.data_dir / "workers" / worker
            assert sorted(p.name for p in directory.iterdir() if p.is_dir()) == ["p0", "p1", "p2"]
        # and each worker leads the partition it is the preferred leader of
        status = json.loads(stack.ferrymq("cluster", "status", "--json"))
        assert {p["partition"]: p["leader"] for p in status["partitions"]} == {
            0: "worker-0",
            1: "worker-1",
            2: "worker-2",
        }
        assert all(sorted(p["isr"]) == ["worker-0", "worker-1", "worker-2"] for p in status["partitions"])
    finally:
        stack.stop()
