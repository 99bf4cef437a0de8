"""SIGTERM to a storage worker (the container image's entry point, ``python -m ferrymq.storage``, run as a plain
process by ``ferrymq up``) hands its leadership to an in-sync replica before it exits.

The lease is long (30 s) and preferred-replica handovers are off, so nothing but the stopping worker's own
hand-over moves the leadership soon; ``up`` is paused meanwhile (SIGSTOP), so it does not start the stopped
worker again, which as the partition's last leader would claim it straight back.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import group_members
from tests.support.sqs_clients import sqs_client
from tests.support.stack import Stack, started

LEASE_SECONDS = 30


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Stack]:
    yield from started(tmp_path / "ferrymq", {
        "FERRYMQ_LEADER_LEASE_SECONDS": str(LEASE_SECONDS),
        "FERRYMQ_LEADER_HANDOVER_SECONDS": "0",
        "FERRYMQ_PARTITIONS": "1",
    })


def _status(stack: Stack) -> dict:
    return json.loads(stack.ferrymq("cluster", "status", "--json"))


def _worker_pids(stack: Stack) -> dict[str, int]:
    assert stack.process is not None
    return {argv[argv.index("--worker-id") + 1]: pid for pid, argv in group_members(stack.process.pid).items()
            if "ferrymq.storage" in argv and "--worker-id" in argv}


def _healthy(stack: Stack) -> dict:
    deadline = time.monotonic() + 60
    while True:
        status = _status(stack)
        (partition,) = status["partitions"]
        if len(partition["isr"]) == 3 and all(w["answers"] for w in status["workers"]):
            return partition
        assert time.monotonic() < deadline, f"the cluster did not come up whole: {status}"
        time.sleep(0.3)


def _exited(pid: int) -> None:
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid):
        assert time.monotonic() < deadline, f"worker {pid} did not exit after SIGTERM"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "X"


def test_sigterm_hands_leadership_to_an_in_sync_replica_and_loses_nothing(cluster: Stack) -> None:
    # given a cluster of three with every replica in sync, and messages acknowledged by the leader
    before = _healthy(cluster)
    leader = before["leader"]
    sqs = sqs_client(cluster.endpoint, "json", region=cluster.region)
    url = sqs.create_queue(QueueName="rolling-replacement")["QueueUrl"]
    sent = {f"m{i}" for i in range(20)}
    for body in sorted(sent):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    assert cluster.process is not None
    up = cluster.process.pid
    victim = _worker_pids(cluster)[leader]
    os.kill(up, signal.SIGSTOP)
    try:
        # when the leader is told to stop, and has exited
        os.kill(victim, signal.SIGTERM)
        _exited(victim)
        # then its lease is over already (another worker may have claimed it meanwhile): it did not wait
        now = _status(cluster)["partitions"][0]
        assert now["leader"] != leader or now["lease_ms_left"] == 0, now
        # and ferrymq cluster status soon names an in-sync replica as the leader, in a later epoch
        deadline = time.monotonic() + LEASE_SECONDS / 2
        while now["leader"] == leader:
            assert time.monotonic() < deadline, f"leadership did not move: {now}"
            time.sleep(0.2)
            now = _status(cluster)["partitions"][0]
        assert now["leader"] in before["isr"] and now["epoch"] > before["epoch"]
        # and every acknowledged message is there
        received: set[str] = set()
        while received != sent:
            answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
            messages = answer.get("Messages", [])
            assert messages or time.monotonic() < deadline + 10, f"missing {sent - received}"
            received.update(m["Body"] for m in messages)
        assert received == sent
    finally:
        os.kill(up, signal.SIGCONT)
