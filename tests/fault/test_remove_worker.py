"""A worker leaves a running cluster for good under load: ``ferrymq cluster remove-worker`` moves the
leadership it holds away first, then each of its replicas to another worker (copied and in sync before its own
is dropped); nothing acknowledged is lost, and every partition keeps three in-sync replicas.

The stack runs with periodic leadership handovers off (``FERRYMQ_LEADER_HANDOVER_SECONDS=0``), so the only way
leadership can leave the worker is the handover a worker marked leaving makes by itself.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from ferrymq.infra.up_process import ferrymq_command
from tests.e2e.conftest import Stack
from tests.e2e.test_clusters import partitions_of_queues
from tests.fault.conftest import fault_stack
from tests.fault.test_failover import cluster_status, run_scenario

WORKERS = ["worker-0", "worker-1", "worker-2", "worker-3"]


@pytest.fixture(scope="module")
def four_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from fault_stack(
        tmp_path_factory, "remove-worker-stack", FERRYMQ_WORKERS="4", FERRYMQ_PARTITIONS="4",
        FERRYMQ_LEADER_HANDOVER_SECONDS="0",
    )


def remove_worker(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """``ferrymq cluster remove-worker ARGS`` without a terminal."""
    return subprocess.run(
        [*ferrymq_command(), "cluster", "remove-worker", *args], env=stack.env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=90, check=False,
    )


def answered_on_a_terminal(stack: Stack, worker: str, answer: str) -> subprocess.CompletedProcess[str]:
    """``ferrymq cluster remove-worker WORKER`` with a terminal as its input, given ``answer``."""
    main, terminal = pty.openpty()
    try:
        os.write(main, f"{answer}\n".encode())
        return subprocess.run(
            [*ferrymq_command(), "cluster", "remove-worker", worker], env=stack.env, stdin=terminal,
            capture_output=True, text=True, timeout=90, check=False,
        )
    finally:
        os.close(terminal)
        os.close(main)


def settled(stack: Stack, workers: int, timeout: float = 60.0) -> dict:
    """Until ``workers`` workers answer and every partition has a claimed leader and every replica in sync."""
    deadline = time.monotonic() + timeout
    while True:
        status = cluster_status(stack)
        answering = [w for w in status["workers"] if w["answers"]]
        in_sync = all(
            p["lease_ms_left"] > 0 and sorted(p["isr"]) == sorted(p["replicas"]) for p in status["partitions"]
        )
        if len(answering) == workers and status["partitions"] and in_sync:
            return status
        assert time.monotonic() < deadline, f"the cluster did not settle: {status}"
        time.sleep(0.5)


def test_an_unknown_worker_an_unconfirmed_removal_and_a_declined_one_are_refused(four_workers: Stack) -> None:
    before = settled(four_workers, 4)
    # an unknown worker
    unknown = remove_worker(four_workers, "worker-9", "--yes")
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "ferrymq: worker worker-9 is unknown in cluster local"
    # a known one, without a terminal to confirm on and without --yes
    unconfirmed = remove_worker(four_workers, "worker-1")
    assert unconfirmed.returncode == 1
    assert "pass --yes" in unconfirmed.stderr and unconfirmed.stdout == ""
    # and on a terminal, anything but yes to the question
    declined = answered_on_a_terminal(four_workers, "worker-1", "n")
    assert declined.returncode == 1
    assert "remove worker worker-1 from cluster local? [y/N]" in declined.stderr
    assert "ferrymq: nothing changed" in declined.stderr
    # and none of them changed anything
    after = cluster_status(four_workers)
    assert [p["replicas"] for p in after["partitions"]] == [p["replicas"] for p in before["partitions"]]
    assert {w["state"] for w in after["workers"]} == {"serving"}


def test_the_leader_of_a_loaded_partition_is_removed_under_load_and_nothing_is_lost(four_workers: Stack) -> None:
    # given four workers holding four partitions, three replicas each
    before = settled(four_workers, 4)
    assert Counter(r for p in before["partitions"] for r in p["replicas"]) == dict.fromkeys(WORKERS, 3)
    leaders = {p["partition"]: p["leader"] for p in before["partitions"]}
    removed: list[str] = []
    report: list[dict] = []

    def remove_the_leader_of_the_standard_queue() -> None:
        partition = next(p for name, p in partitions_of_queues(four_workers).items() if not name.endswith(".fifo"))
        removed.append(leaders[partition])
        report.append(json.loads(four_workers.ferrymq("cluster", "remove-worker", removed[0], "--yes", "--json")))

    # when the worker leading the standard queue's partition is removed while both queues are under load
    # (the scenario checks nothing acknowledged is lost, unexpected or back after its delete)
    run_scenario(four_workers, remove_the_leader_of_the_standard_queue, healthy=False)
    victim = removed[0]
    # then its three replicas moved, one per partition, and the partition it led is led by another worker
    moved = report[0]["moved"]
    held = sorted(p["partition"] for p in before["partitions"] if victim in p["replicas"])
    assert len(held) == 3 and sorted(m["partition"] for m in moved) == held
    assert all(victim not in m["after"] and len(m["after"]) == 3 for m in moved)
    assert any(m["leader_before"] == victim for m in moved)
    assert all(m["leader_after"] != victim for m in moved)
    # and it holds no replica, every partition has three in sync, and the others hold four each
    after = settled(four_workers, 4)
    assert all(victim not in p["replicas"] and p["leader"] != victim for p in after["partitions"])
    assert all(len(p["replicas"]) == 3 for p in after["partitions"])
    stay = [w for w in WORKERS if w != victim]
    assert Counter(r for p in after["partitions"] for r in p["replicas"]) == dict.fromkeys(stay, 4)
    # and it still runs, marked leaving, so nothing is placed on it again
    gone = next(w for w in after["workers"] if w["worker_id"] == victim)
    assert gone["answers"] and gone["state"] == "leaving"
    # and removing it again finds nothing to move
    again = remove_worker(four_workers, victim, "--yes")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == f"worker {victim} holds no replica in cluster local any more; it may be stopped"
    # and removing another of the three that stay is refused: two could not hold three replicas
    too_few = remove_worker(four_workers, stay[0], "--yes")
    assert too_few.returncode == 1
    assert f"removing worker {stay[0]} would leave 2 live worker(s) in cluster local" in too_few.stderr
    assert "fewer than the 3 replicas its partitions need" in too_few.stderr
    unchanged = cluster_status(four_workers)["partitions"]
    assert [p["replicas"] for p in unchanged] == [p["replicas"] for p in after["partitions"]]
