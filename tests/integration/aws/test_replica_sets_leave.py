"""ReplicaSets.leave_isr against a real DynamoDB API (the durable stand-in): a replica whose damaged copy is set
aside takes itself out of the in-sync set, never as its last member, and only as the item it read still is."""

from __future__ import annotations

import uuid

import pytest

from ferrymq.aws.replica_sets import Fenced, LastInSync, NoSuchPartition, NotInSync, ReplicaSets
from ferrymq.clock import ManualClock
from ferrymq.replication_rules import Acks, ReplicaSet, may_claim

LEASE_MS = 5_000


def led_by_a(sets: ReplicaSets, partition: int, now_ms: int) -> ReplicaSet:
    sets.create(partition, f"cluster-{uuid.uuid4().hex[:8]}", ["a", "b", "c"], Acks.MAJORITY)
    return sets.claim(partition, "a", 1, now_ms, LEASE_MS)


def test_a_follower_leaves_the_in_sync_set_and_may_no_longer_claim(sets: ReplicaSets, partition: int) -> None:
    now = int(ManualClock().now() * 1000)
    seen = led_by_a(sets, partition, now)
    # when follower b leaves
    left = sets.leave_isr(partition, "b", seen, now)
    # then only b left; the leader, its epoch and lease are as they were
    assert left.isr == frozenset({"a", "c"})
    assert (left.leader, left.epoch, left.lease_until) == (seen.leader, seen.epoch, seen.lease_until)
    assert not may_claim(left, "b", now + LEASE_MS * 2)
    # and leaving again is refused as not in sync (the caller goes on as a lagging follower)
    with pytest.raises(NotInSync):
        sets.leave_isr(partition, "b", left, now)


def test_a_leader_that_leaves_ends_its_lease_so_another_in_sync_replica_claims_at_once(
    sets: ReplicaSets, partition: int
) -> None:
    now = int(ManualClock().now() * 1000)
    seen = led_by_a(sets, partition, now)
    left = sets.leave_isr(partition, "a", seen, now + 10)
    assert left.isr == frozenset({"b", "c"}) and left.lease_until == now + 10
    assert not may_claim(left, "a", now + 11)
    assert sets.claim(partition, "b", left.epoch, now + 11, LEASE_MS).leader == "b"


def test_the_last_in_sync_replica_never_leaves(sets: ReplicaSets, partition: int) -> None:
    now = int(ManualClock().now() * 1000)
    seen = led_by_a(sets, partition, now)
    left = sets.leave_isr(partition, "c", sets.leave_isr(partition, "b", seen, now), now)
    assert left.isr == frozenset({"a"})
    with pytest.raises(LastInSync) as refused:
        sets.leave_isr(partition, "a", left, now)
    assert refused.value.current == left == sets.get(partition)


def test_a_leave_from_a_stale_read_is_refused_and_changes_nothing(sets: ReplicaSets, partition: int) -> None:
    now = int(ManualClock().now() * 1000)
    stale = led_by_a(sets, partition, now)
    # b claims after the lease (a new epoch) while c still holds the read of epoch 2
    claimed = sets.claim(partition, "b", stale.epoch, now + LEASE_MS + 1, LEASE_MS)
    with pytest.raises(Fenced):
        sets.leave_isr(partition, "c", stale, now)
    # and a read naming another leader than the item's is stale too: the lease would end wrongly
    with pytest.raises(Fenced):
        sets.leave_isr(partition, "b", stale, now)
    assert sets.get(partition) == claimed


def test_leaving_a_partition_without_a_replica_set_is_refused(sets: ReplicaSets, partition: int) -> None:
    ghost = ReplicaSet(partition=partition, cluster="x", replicas=("a", "b"), leader="a", epoch=1,
                       isr=frozenset({"a", "b"}), lease_until=0, acks=Acks.MAJORITY)
    with pytest.raises(NoSuchPartition):
        sets.leave_isr(partition, "b", ghost, 0)
