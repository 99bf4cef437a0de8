"""Placement inside a cluster: replica lists spread leadership, and dead replicas are replaced evenly."""

from __future__ import annotations

from collections import Counter

import pytest

from ferrymq.placement import holding, replacements, replicas_for

WORKERS = ["w0", "w1", "w2", "w3"]


def test_each_worker_is_the_preferred_leader_of_an_equal_share_and_holds_an_equal_share() -> None:
    lists = [replicas_for(p, WORKERS, 3) for p in range(8)]
    assert Counter(replicas[0] for replicas in lists) == {w: 2 for w in WORKERS}
    assert {w: len(ps) for w, ps in holding(range(8), WORKERS, 3).items()} == {w: 6 for w in WORKERS}
    assert all(len(set(replicas)) == 3 for replicas in lists)


@pytest.mark.parametrize(("workers", "rf"), [([], 1), (["a"], 2), (["a", "a"], 1), (["a"], 0)])
def test_impossible_shapes_are_refused(workers: list[str], rf: int) -> None:
    with pytest.raises(ValueError):
        replicas_for(0, workers, rf)


def test_a_dead_replica_is_replaced_in_place_by_the_least_loaded_live_worker() -> None:
    # given three partitions on w0..w2 and a spare w3, and w2 dead
    sets = [(p, "w0", ("w0", "w1", "w2")) for p in range(3)]
    # then each partition gets a replacement for w2, the spare first (it holds nothing), spread by load
    new = replacements(sets, alive=["w0", "w1", "w3", "w4"], dead=["w2"])
    assert set(new) == {0, 1, 2}
    assert [replicas[2] for replicas in new.values()] == ["w3", "w4", "w3"]
    assert all(replicas[:2] == ("w0", "w1") for replicas in new.values())


def test_a_dead_leader_is_left_to_an_election_and_no_replacement_without_a_spare() -> None:
    sets = [(0, "w2", ("w2", "w0", "w1")), (1, "w0", ("w0", "w1", "w2"))]
    # a partition led by the dead worker waits for its election; with no spare, nothing changes
    assert replacements(sets, alive=["w0", "w1"], dead=["w2"]) == {}
    assert replacements(sets, alive=["w0", "w1", "w3"], dead=["w2"]) == {1: ("w0", "w1", "w3")}
