"""A worker gone for good: the in-cluster manager replaces its replicas on a spare worker, which copies the
partition and joins the in-sync set, so the replica count is back to three; nothing acknowledged is lost.

The worker is "gone" by SIGSTOP (a machine that hangs: ``up`` sees a live process and restarts nothing, the
cluster sees no heartbeat) until the manager has moved its replicas; woken up, it finds itself outside the
replica set and stands by.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import Stack
from tests.fault.conftest import fault_stack
from tests.fault.test_failover import cluster_status, run_scenario, worker_pids


@pytest.fixture(scope="module")
def four_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from fault_stack(
        tmp_path_factory, "rereplication-stack", FERRYMQ_WORKERS="4", FERRYMQ_WORKER_GRACE_SECONDS="3"
    )


def test_the_replicas_of_a_worker_gone_for_good_move_to_a_spare(four_workers: Stack) -> None:
    # given four workers, partition 0 on worker-0..2 and worker-3 a spare
    before = cluster_status(four_workers)["partitions"][0]
    assert before["replicas"] == ["worker-0", "worker-1", "worker-2"]
    victim = "worker-2"
    pid = worker_pids(four_workers)[victim]

    def gone_for_good() -> None:
        os.kill(pid, signal.SIGSTOP)

    try:
        # when a follower stops answering under load, for longer than the grace period
        run_scenario(four_workers, gone_for_good, healthy=False)
        # then the manager replaced it by the spare, which caught up and is in sync: three replicas again
        deadline = time.monotonic() + 60
        while True:
            part = cluster_status(four_workers)["partitions"][0]
            if victim not in part["replicas"] and sorted(part["isr"]) == sorted(part["replicas"]):
                break
            assert time.monotonic() < deadline, f"not re-replicated: {part}"
            time.sleep(0.5)
        assert part["replicas"] == ["worker-0", "worker-1", "worker-3"]
    finally:
        os.kill(pid, signal.SIGCONT)
    # and the old worker, back, stands by: it answers, but the partition's replicas stay as they are
    time.sleep(2)
    after = cluster_status(four_workers)
    assert after["partitions"][0]["replicas"] == ["worker-0", "worker-1", "worker-3"]
    assert next(w for w in after["workers"] if w["worker_id"] == victim)["answers"]
