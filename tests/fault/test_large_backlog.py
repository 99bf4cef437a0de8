"""A follower that misses a large backlog rejoins under load, in a real ``ferrymq up`` (three workers, RF 3).

Under send + receive + delete load, a follower is stopped (SIGSTOP), 200 MB of messages that nobody consumes are
written to another queue, and the follower is killed; ``up`` restarts it on its old log, and it catches up on the
200 MB from its leader's log while the load goes on.  Checked like the other scenarios (nothing acknowledged lost,
nothing unexpected or deleted, FIFO order), plus: the follower is back in the in-sync set, and every message of
the backlog is still there.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.conftest import Stack
from tests.fault.conftest import fault_stack
from tests.fault.test_failover import run_scenario, wait_healthy, worker_pids
from tests.fault.workload import fault_client

BACKLOG_BYTES = 200 * 1024 * 1024
BODY_BYTES = 200 * 1024
SENDERS = 8


@pytest.fixture(scope="module")
def backlog_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # A checkpoint every 32 MiB: a few while the backlog is written, as a worker would take them.
    yield from fault_stack(tmp_path_factory, "backlog-stack", FERRYMQ_WORKER_CHECKPOINT_BYTES=str(32 * 1024 * 1024))


def write_backlog(stack: Stack, url: str) -> int:
    """Send ``BACKLOG_BYTES`` of messages to ``url`` from ``SENDERS`` threads; returns how many were sent."""
    count = BACKLOG_BYTES // BODY_BYTES

    def send(sender: int) -> int:
        client = fault_client(stack.endpoint)
        sent = 0
        for i in range(sender, count, SENDERS):
            body = f"{i:08d}" + "b" * (BODY_BYTES - 8)
            for attempt in range(5):
                try:
                    client.send_message(QueueUrl=url, MessageBody=body)
                    sent += 1
                    break
                except Exception:
                    # The outcome of a send that failed is unknown: the count below is checked as at least.
                    time.sleep(0.2 * (attempt + 1))
        return sent

    with ThreadPoolExecutor(SENDERS) as pool:
        return sum(pool.map(send, range(SENDERS)))


def test_a_follower_stopped_through_a_200_mb_backlog_rejoins_under_load(backlog_stack: Stack) -> None:
    part = wait_healthy(backlog_stack)["partitions"][0]
    victim = next(r for r in part["replicas"] if r != part["leader"])
    backlog_url = fault_client(backlog_stack.endpoint).create_queue(QueueName=f"backlog-{uuid.uuid4().hex[:6]}")[
        "QueueUrl"
    ]
    written = 0

    def miss_the_backlog() -> None:
        nonlocal written
        pid = worker_pids(backlog_stack)[victim]
        os.kill(pid, signal.SIGSTOP)
        written = write_backlog(backlog_stack, backlog_url)
        os.kill(pid, signal.SIGKILL)

    run_scenario(backlog_stack, miss_the_backlog)
    status = wait_healthy(backlog_stack, timeout=120)
    assert victim in status["partitions"][0]["isr"]
    assert written >= 0.99 * (BACKLOG_BYTES // BODY_BYTES)
    attributes = fault_client(backlog_stack.endpoint).get_queue_attributes(
        QueueUrl=backlog_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert int(attributes["ApproximateNumberOfMessages"]) >= written
