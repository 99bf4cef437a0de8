"""Clock skew: the storage workers' wall clocks run ten seconds behind the front end's (and ``ferrymq up``'s),
and the leader is killed with kill -9 under load.  Resends after unknown outcomes are answered by message id,
and leases by each worker's own clocks, so the checker finds nothing lost, unexpected or resurrected.

The skew is ``FERRYMQ_WORKER_CLOCK_SKEW_MS``, a setting that exists for tests like this one only."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import Stack
from tests.fault.conftest import fault_stack
from tests.fault.test_failover import cluster_status, leader, run_scenario, worker_pids

SKEW_MS = -10_000


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # Heartbeats are wall times read on other machines (here by ``ferrymq cluster status``), so the grace
    # period must exceed the skew for the status to count the workers alive.
    yield from fault_stack(
        tmp_path_factory, "fault-skew", FERRYMQ_WORKER_CLOCK_SKEW_MS=str(SKEW_MS), FERRYMQ_WORKER_GRACE_SECONDS="20"
    )


def test_kill_9_of_the_leader_with_worker_clocks_ten_seconds_behind(skewed: Stack) -> None:
    # given workers whose heartbeats, stamped by their clocks, look ten seconds old to the front end's clock
    victim = leader(skewed)
    ages = [w["heartbeat_age_ms"] for w in cluster_status(skewed)["workers"]]
    assert all(age >= -SKEW_MS - 2_000 for age in ages), ages
    # when the leader is killed under load, then the checker finds nothing lost, unexpected or resurrected
    standard, fifo = run_scenario(skewed, lambda: os.kill(worker_pids(skewed)[victim], signal.SIGKILL))
    assert standard.lost == standard.unexpected == standard.resurrected == []
    assert fifo.lost == fifo.unexpected == fifo.resurrected == []
