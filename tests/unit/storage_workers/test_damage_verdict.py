"""What a worker does with a damaged copy of a partition, by the partition's coordination item: set it aside
(leaving the in-sync set first when in it) when another in-sync replica holds everything acknowledged;
otherwise refuse the partition and keep the copy as it is."""

from __future__ import annotations

from ferrymq.replication_rules import Acks, ReplicaSet
from ferrymq.storage.server.damage import Verdict, verdict


def item(isr: set[str], replicas: tuple[str, ...] = ("a", "b", "c"), leader: str = "a") -> ReplicaSet:
    return ReplicaSet(partition=0, cluster="c", replicas=replicas, leader=leader, epoch=3, isr=frozenset(isr),
                      lease_until=0, acks=Acks.MAJORITY)


def test_an_in_sync_replica_with_others_in_sync_leaves_then_sets_aside() -> None:
    assert verdict(item({"a", "b", "c"}), "b")[0] is Verdict.LEAVE_THEN_SET_ASIDE
    assert verdict(item({"a", "b"}), "a")[0] is Verdict.LEAVE_THEN_SET_ASIDE


def test_a_lagging_replica_sets_aside_without_a_write() -> None:
    assert verdict(item({"a", "c"}), "b")[0] is Verdict.SET_ASIDE


def test_the_last_in_sync_replica_refuses() -> None:
    action, why = verdict(item({"b"}, leader="b"), "b")
    assert action is Verdict.REFUSE and why == "no other in-sync replica holds what this copy held"


def test_without_a_replica_set_or_outside_it_the_copy_is_refused() -> None:
    assert verdict(None, "a")[0] is Verdict.REFUSE
    assert verdict(item({"a", "b"}, replicas=("a", "b")), "z")[0] is Verdict.REFUSE
