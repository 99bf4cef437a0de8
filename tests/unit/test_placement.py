"""Placement inside a cluster: replica lists spread leadership, dead replicas are replaced evenly, and a
leaving worker's replicas go where they keep the counts even."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Mapping, Sequence

import pytest

from ferrymq.placement import CannotMove, holding, replacements, replicas_for, with_new_worker, without_worker

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


def counts(lists: Mapping[int, Sequence[str]], workers: Sequence[str]) -> dict[str, int]:
    return {w: sum(w in r for r in lists.values()) for w in workers}


def moved_replicas(before: Mapping[int, Sequence[str]], after: Mapping[int, Sequence[str]]) -> int:
    return sum(a != b for p in before for a, b in zip(before[p], after[p], strict=True))


@pytest.mark.parametrize("leaving", WORKERS)
def test_a_leaving_worker_hands_each_replica_in_place_to_a_worker_without_one_and_nothing_else_moves(
    leaving: str,
) -> None:
    # given four partitions on four workers, three replicas each
    before = {p: replicas_for(p, WORKERS, 3) for p in range(4)}
    stay = [w for w in WORKERS if w != leaving]
    # when one worker leaves
    after = without_worker(before, leaving, stay)
    # then its three replicas moved, each to the one worker that did not hold the partition, at its rank
    assert moved_replicas(before, after) == 3
    for p in before:
        assert leaving not in after[p] and len(set(after[p])) == 3
        for a, b in zip(before[p], after[p], strict=True):
            assert a in (b, leaving)
    assert counts(after, stay) == dict.fromkeys(stay, 4)


@pytest.mark.parametrize(("workers", "partitions"), [(4, 64), (5, 10), (6, 12), (7, 35), (9, 18)])
def test_the_counts_stay_within_one_of_each_other_after_a_worker_leaves_a_balanced_cluster(
    workers: int, partitions: int
) -> None:
    names = [f"w{i}" for i in range(workers)]
    before = {p: replicas_for(p, names, 3) for p in range(partitions)}
    assert max(counts(before, names).values()) - min(counts(before, names).values()) <= 1
    for leaving in names:
        stay = [w for w in names if w != leaving]
        after = without_worker(before, leaving, stay)
        held = counts(after, stay)
        assert max(held.values()) - min(held.values()) <= 1, (leaving, held)
        assert moved_replicas(before, after) == counts(before, [leaving])[leaving]
        assert all(len(set(r)) == 3 and leaving not in r for r in after.values())


def test_a_worker_that_joined_and_leaves_again_leaves_the_counts_within_one() -> None:
    names = ["w0", "w1", "w2", "w3"]
    before = {p: replicas_for(p, names, 3) for p in range(16)}
    joined = with_new_worker(before, "w4")
    after = without_worker(joined, "w4", names)
    held = counts(after, names)
    assert max(held.values()) - min(held.values()) <= 1 and sum(held.values()) == 48


def test_a_replica_the_first_choice_would_strand_on_a_busy_worker_is_chained_onward() -> None:
    # given loads w0 1, w1 2, w2 1, w3 3 once w4 leaves; partition 0 may go to w0 or w2, partition 1 to w0 or w1
    before = {0: ("w3", "w4", "w1"), 1: ("w3", "w2", "w4"), 2: ("w1", "w3", "w0")}
    # when w4 leaves (least loaded first alone would give w0 both: counts 3, 2, 1, 3)
    after = without_worker(before, "w4", ["w0", "w1", "w2", "w3"])
    # then partition 0 went to w2 instead, and no count is two apart from another
    assert after == {0: ("w3", "w2", "w1"), 1: ("w3", "w2", "w0"), 2: ("w1", "w3", "w0")}
    assert counts(after, ["w0", "w1", "w2", "w3"]) == {"w0": 2, "w1": 2, "w2": 2, "w3": 3}


def test_the_counts_are_as_even_as_any_placement_of_the_moved_replicas_makes_them() -> None:
    rng = random.Random(7)
    checked = 0
    for _ in range(400):
        names = [f"w{i}" for i in range(rng.randint(4, 6))]
        before = {p: tuple(rng.sample(names, 3)) for p in range(rng.randint(1, 7))}
        leaving = rng.choice(names)
        stay = [w for w in names if w != leaving]
        moving = sorted(p for p, r in before.items() if leaving in r)
        options = [[w for w in stay if w not in before[p]] for p in moving]
        if not moving or not all(options):
            continue
        after = without_worker(before, leaving, stay)
        # every other placement of the moved replicas is no more even (spread, then the largest count)
        best = min(
            _shape({p: tuple(dict(zip(moving, pick, strict=True)).get(p, w) if w == leaving else w
                             for w in r) for p, r in before.items()}, stay)
            for pick in itertools.product(*options)
        )
        assert _shape(after, stay) == best, (before, leaving, after)
        checked += 1
    assert checked > 100


def _shape(lists: Mapping[int, Sequence[str]], stay: Sequence[str]) -> tuple[int, int]:
    held = counts(lists, stay).values()
    return max(held) - min(held), max(held)


def test_a_worker_that_holds_nothing_changes_nothing_and_only_staying_workers_take_replicas() -> None:
    before = {p: replicas_for(p, ["w0", "w1", "w2"], 3) for p in range(3)}
    assert without_worker(before, "w9", ["w0", "w1", "w2"]) == before
    # a worker outside the staying ones (dead, or leaving too) is never chosen, however empty
    wider = {p: replicas_for(p, WORKERS, 3) for p in range(4)}
    after = without_worker(wider, "w0", ["w1", "w2", "w3"])
    assert all("w0" not in r and "w9" not in r for r in after.values())


def test_a_replica_with_nowhere_to_go_is_refused_naming_its_partition() -> None:
    # given three workers holding every partition: a leaving one leaves its replicas nowhere to go
    before = {p: replicas_for(p, ["w0", "w1", "w2"], 3) for p in range(3)}
    with pytest.raises(CannotMove) as refused:
        without_worker(before, "w1", ["w0", "w2"])
    assert refused.value.partition == 0
    assert "partition 0" in str(refused.value)
