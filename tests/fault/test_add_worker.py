"""A worker joins a running cluster under load: ``ferrymq cluster add-worker`` moves it a fair share of the
replicas, each copied and in sync before the replica it replaces is dropped; nothing acknowledged is lost.

The new worker is started by hand, as an operator starts a new machine, with the environment the stack gives
its own workers (read from one of them), holding nothing; the command then rebalances onto it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferrymq.infra.up_process import ferrymq_command
from tests.e2e.conftest import Stack
from tests.fault.conftest import fault_stack
from tests.fault.test_failover import cluster_status, run_scenario, worker_pids
from tests.support.processes import terminate_group

NEW = "worker-3"


@pytest.fixture(scope="module")
def four_partitions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from fault_stack(tmp_path_factory, "add-worker-stack", FERRYMQ_PARTITIONS="4")


def environment_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in raw if b"=" in entry)


def start_spare(stack: Stack) -> subprocess.Popen[bytes]:
    env = environment_of(worker_pids(stack)["worker-0"])
    log = (stack.data_dir / f"{NEW}.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "ferrymq.storage", "--partitions", "", "--worker-id", NEW, "--cluster", "local",
         "--port", "0"],
        env=env, stdout=log, stderr=log, start_new_session=True,
    )


def test_a_new_worker_takes_a_fair_share_of_the_replicas_under_load(four_partitions: Stack) -> None:
    # given three workers holding four partitions, three replicas each, and a fourth worker started empty
    spare = start_spare(four_partitions)
    try:
        deadline = time.monotonic() + 60
        while not any(w["worker_id"] == NEW and w["answers"] for w in cluster_status(four_partitions)["workers"]):
            assert time.monotonic() < deadline, "the new worker did not join"
            time.sleep(0.5)
        before = {p["partition"]: p["replicas"] for p in cluster_status(four_partitions)["partitions"]}
        moves: list[str] = []

        def add_worker() -> None:
            moves.extend(four_partitions.ferrymq("cluster", "add-worker", NEW, "--catch-up-seconds", "60").splitlines())

        # when it is added while standard and FIFO queues are under load (the scenario checks nothing is lost)
        # (the cluster is healthy: every replica in sync; the spare is outside the stack's own processes)
        assert all(sorted(p["isr"]) == sorted(p["replicas"]) for p in cluster_status(four_partitions)["partitions"])
        run_scenario(four_partitions, add_worker, healthy=False)
        # then it took a quarter of the twelve replicas, one per moved partition, and every worker holds three
        after = cluster_status(four_partitions)["partitions"]
        assert len(moves) == 3, moves
        held = Counter(r for p in after for r in p["replicas"])
        assert held == {"worker-0": 3, "worker-1": 3, "worker-2": 3, NEW: 3}
        for p in after:
            assert len(p["replicas"]) == 3 and sorted(p["isr"]) == sorted(p["replicas"]), p
            # and only the replica it replaced moved
            assert len(set(before[p["partition"]]) - set(p["replicas"])) <= 1
        # and adding it again is refused, with what to do
        again = subprocess.run(
            [*ferrymq_command(), "cluster", "add-worker", NEW], env=four_partitions.env,
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert again.returncode == 1
        assert f"worker {NEW} already holds replicas in cluster local" in again.stderr
    finally:
        terminate_group(spare, 10)
