"""The stack comes up the way a user starts it, and an unmodified boto3 SQS client can talk to it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import boto3

from tests.e2e.conftest import Stack
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
    group = os.getpgid(stack.process.pid)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != group:
                continue
            found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except (ProcessLookupError, FileNotFoundError, PermissionError):
            continue
    return found


def test_a_stack_of_three_partitions_runs_one_worker_serving_all_of_them(tmp_path: Path) -> None:
    # given `ferrymq up` with three partitions
    stack = Stack(tmp_path / "ferrymq", {"FERRYMQ_PARTITIONS": "3"})
    try:
        stack.start()
        client = sqs_client(stack.endpoint, "json")
        # when forty queues are made (queue ids spread over the partitions: each partition gets some but with
        # odds below one in a million), and each gets a message
        workers = [c for c in _stack_processes(stack) if "storage_workers" in c]
        directory = stack.data_dir / "workers" / "worker-0"
        for i in range(40):
            url = client.create_queue(QueueName=f"spread-{i}")["QueueUrl"]
            client.send_message(QueueUrl=url, MessageBody=f"body {i}")
            got = client.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
            # then every message comes back from its queue
            assert [m["Body"] for m in got] == [f"body {i}"]
        # and one storage worker serves the three partitions, each in a log directory of its own
        assert len(workers) == 1, workers
        assert "--partitions 0,1,2" in workers[0]
        assert sorted(p.name for p in directory.iterdir() if p.is_dir()) == ["p0", "p1", "p2"]
    finally:
        stack.stop()
