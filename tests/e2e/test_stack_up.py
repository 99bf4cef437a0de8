"""The stack comes up the way a user starts it, and an unmodified boto3 SQS client can talk to it."""

from __future__ import annotations

import gzip
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from ferrymq.infra.aws_target import admin_target
from ferrymq.settings import Settings
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


def _usage_request_ids(stack: Stack) -> set[str]:
    """The request ids of the usage records in the stack's bucket, read with the stack stopped (through a stand-in
    started for the moment on its data directory, as an admin command would)."""
    with admin_target(Settings(data_dir=stack.data_dir), stack.env) as target:
        env = {**stack.env, **target.environment}
        s3 = boto3.client("s3", endpoint_url=target.endpoint, region_name=stack.region,
                          aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                          config=Config(s3={"addressing_style": "path"}))
        bucket = stack.env.get("FERRYMQ_USAGE_BUCKET", Settings().usage_bucket)
        ids = set()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="usage/v1/"):
            for item in page.get("Contents", ()):
                body = gzip.decompress(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
                ids |= {json.loads(line)["request_id"] for line in body.splitlines()}
        return ids


def test_a_stack_of_three_partitions_runs_a_cluster_of_three_workers_each_leading_one_and_stops_quietly(
    tmp_path: Path,
) -> None:
    # given `ferrymq up` with three partitions (three workers, replication factor 3 by default), its usage records
    # uploaded only when it stops
    stack = Stack(tmp_path / "ferrymq", {"FERRYMQ_PARTITIONS": "3", "FERRYMQ_USAGE_FLUSH_SECONDS": "3600"})
    try:
        stack.start()
        client = sqs_client(stack.endpoint, "json")
        # when forty queues are made (queue ids spread over the partitions: each partition gets some but with
        # odds below one in a million), and each gets a message
        workers = [c for c in _stack_processes(stack) if "ferrymq.storage" in c]
        sent = set()
        for i in range(40):
            url = client.create_queue(QueueName=f"spread-{i}")["QueueUrl"]
            sent.add(client.send_message(QueueUrl=url, MessageBody=f"body {i}")["ResponseMetadata"]["RequestId"])
            got = client.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
            # then every message comes back from its queue
            assert [m["Body"] for m in got] == [f"body {i}"]
        # and three storage workers hold a replica of every partition, each in a log directory of its own
        assert len(workers) == 3, workers
        assert all("--partitions 0,1,2" in w for w in workers)
        for worker in ("worker-0", "worker-1", "worker-2"):
            directory = stack.data_dir / "workers" / worker
            assert sorted(p.name for p in directory.iterdir() if p.is_dir()) == ["p0", "p1", "p2"]
        # and each worker leads the partition it is the preferred leader of: at once, or (a worker slow to start
        # on a loaded machine lets another claim first) once leadership is handed back to it
        preferred = {0: "worker-0", 1: "worker-1", 2: "worker-2"}
        deadline = time.monotonic() + Settings().leader_handover_seconds + 20
        while True:
            status = json.loads(stack.ferrymq("cluster", "status", "--json"))
            leaders = {p["partition"]: p["leader"] for p in status["partitions"]}
            if leaders == preferred or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert leaders == preferred
        assert all(sorted(p["isr"]) == ["worker-0", "worker-1", "worker-2"] for p in status["partitions"])

        # when Ctrl-C reaches the whole stack at once, as in the terminal of `make up`
        assert stack.process is not None
        os.killpg(stack.process.pid, signal.SIGINT)
        # then it stops cleanly, in dependency order: nothing warns, and the last usage records reached S3
        assert stack.process.wait(60) == 0
        noisy = [line for line in stack.log_path.read_text().splitlines()
                 if "WARNING" in line or "ERROR" in line or "Traceback" in line]
        assert noisy == []
        assert sent <= _usage_request_ids(stack)
    finally:
        stack.stop()
