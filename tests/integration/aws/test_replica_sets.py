"""ReplicaSets against a real DynamoDB API: the durable stand-in (whose writes are atomic), or
FERRYMQ_TEST_AWS_ENDPOINT. Time is a ManualClock; leases are compared, never waited out."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from ferrymq.aws import session
from ferrymq.aws.partitions import PartitionMap
from ferrymq.aws.replica_sets import (
    Fenced,
    LeaderMustStay,
    LeaseHeld,
    NoSuchPartition,
    NotAReplica,
    NotInSync,
    PartitionExists,
    ReplicaSets,
)
from ferrymq.clock import ManualClock
from ferrymq.errors import ServiceUnavailable
from ferrymq.replication_rules import Acks, ReplicaSet
from ferrymq.settings import Settings
from tests.support.aws_clients import unreachable_dynamodb
from tests.support.partition_items import address_item

LEASE_MS = 5_000


def ms(clock: ManualClock) -> int:
    return int(clock.now() * 1000)


@pytest.fixture
def cluster() -> str:
    return f"cluster-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def led_by_a(sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock) -> ReplicaSet:
    """Given: a, b and c assigned, a leading epoch 1 with a live lease."""
    created = sets.create(partition, cluster, ["a", "b", "c"], Acks.MAJORITY)
    assert (created.leader, created.epoch) == ("a", 1)
    return sets.renew(partition, "a", 1, ms(clock), LEASE_MS)


# --- create and read ---------------------------------------------------------------------------------


def test_create_assigns_every_replica_in_sync_with_the_first_leading(
    sets: ReplicaSets, partition: int, cluster: str
) -> None:
    assert sets.get(partition) is None
    created = sets.create(partition, cluster, ["b", "a", "c"], Acks.ALL)
    assert created == ReplicaSet(
        partition=partition,
        cluster=cluster,
        replicas=("b", "a", "c"),
        leader="b",
        epoch=1,
        isr=frozenset({"a", "b", "c"}),
        lease_until=0,
        acks=Acks.ALL,
    )
    assert sets.get(partition) == created


def test_create_is_idempotent_for_the_same_replicas_only(
    sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    # given a created partition whose leader has since renewed
    renewed = led_by_a(sets, partition, cluster, clock)
    # when it is created again with the same assignment, then the current item comes back unchanged
    assert sets.create(partition, cluster, ["a", "b", "c"], Acks.MAJORITY) == renewed
    # and with another assignment, the partition refuses
    with pytest.raises(PartitionExists) as refused:
        sets.create(partition, cluster, ["a", "b", "d"], Acks.MAJORITY)
    assert refused.value.current == renewed
    with pytest.raises(PartitionExists):
        sets.create(partition, cluster, ["a", "b", "c"], Acks.ALL)


def test_create_continues_the_epochs_of_todays_partition_map_and_keeps_its_attributes(
    aws_settings: Settings, sets: ReplicaSets, partition: int, cluster: str
) -> None:
    # given a partition that workers of before replica sets took twice, with its receipt key
    partition_map = PartitionMap.from_settings(aws_settings)
    key = partition_map.receipt_key(partition)
    client = session.client("dynamodb", aws_settings)
    address_item(client, aws_settings.partitions_table, partition, "old-1", "127.0.0.1", 7001, 1)
    address_item(client, aws_settings.partitions_table, partition, "old-2", "127.0.0.1", 7002, 2)
    # when it gets a replica set, then its epoch goes on from 2: no worker sees it go back
    assert sets.create(partition, cluster, ["a", "b"], Acks.MAJORITY).epoch == 3
    # and the address and the key are untouched (until the first claim publishes its own address)
    address = partition_map.lookup(partition)
    assert address is not None and address.worker_id == "old-2"
    assert partition_map.receipt_key(partition) == key


def test_all_lists_the_replica_sets_of_a_cluster_in_partition_order(
    aws_settings: Settings, sets: ReplicaSets, partition: int, cluster: str
) -> None:
    for offset in (2, 0, 1):
        sets.create(partition + offset, cluster, ["a"], Acks.LEADER)
    sets.create(partition + 3, f"{cluster}-other", ["a"], Acks.LEADER)
    # an item only a worker of before replica sets wrote is no replica set
    address_item(session.client("dynamodb", aws_settings), aws_settings.partitions_table, partition + 4, "old",
                "127.0.0.1", 7001, 1)
    assert [rs.partition for rs in sets.all(cluster)] == [partition, partition + 1, partition + 2]
    everywhere = [rs.partition for rs in sets.all()]
    assert partition + 3 in everywhere and partition + 4 not in everywhere
    assert everywhere == sorted(everywhere)


# --- election ----------------------------------------------------------------------------------------


def test_a_paused_old_leader_is_fenced_out_of_everything(
    sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    # given a leading epoch 1 whose lease then lapses while a is paused
    led_by_a(sets, partition, cluster, clock)
    clock.advance(LEASE_MS / 1000 + 0.001)
    # when b, in sync, claims the next epoch
    taken = sets.claim(partition, "b", 1, ms(clock), LEASE_MS)
    assert (taken.leader, taken.epoch, taken.lease_until) == ("b", 2, ms(clock) + LEASE_MS)
    # then a, waking up, can neither renew, nor change the in-sync set, nor claim from the epoch it knew
    with pytest.raises(Fenced) as renewed:
        sets.renew(partition, "a", 1, ms(clock), LEASE_MS)
    assert renewed.value.current == taken
    with pytest.raises(Fenced):
        sets.shrink_isr(partition, "a", 1, ["b"])
    with pytest.raises(Fenced):
        sets.expand_isr(partition, "a", 1, ["c"])
    with pytest.raises(Fenced):
        sets.claim(partition, "a", 1, ms(clock), LEASE_MS)
    # and reading the new epoch does not help it while b's lease is live
    with pytest.raises(LeaseHeld):
        sets.claim(partition, "a", 2, ms(clock), LEASE_MS)
    assert sets.get(partition) == taken


def test_a_live_lease_cannot_be_stolen_until_its_last_millisecond_has_passed(
    sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    leading = led_by_a(sets, partition, cluster, clock)
    with pytest.raises(LeaseHeld) as refused:
        sets.claim(partition, "b", 1, leading.lease_until, LEASE_MS)
    assert refused.value.current == leading
    assert sets.claim(partition, "b", 1, leading.lease_until + 1, LEASE_MS).leader == "b"


def test_a_replica_outside_the_in_sync_set_cannot_claim(
    sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    # given c dropped from the in-sync set, and a's lease long gone
    led_by_a(sets, partition, cluster, clock)
    assert sets.shrink_isr(partition, "a", 1, ["c"]).isr == {"a", "b"}
    clock.advance(60)
    # then c, assigned but lagging, cannot claim, nor can a worker never assigned
    with pytest.raises(NotInSync):
        sets.claim(partition, "c", 1, ms(clock), LEASE_MS)
    with pytest.raises(NotInSync):
        sets.claim(partition, "x", 1, ms(clock), LEASE_MS)
    after = sets.get(partition)
    assert after is not None and (after.leader, after.epoch) == ("a", 1)


def test_a_restarted_leader_takes_a_new_epoch_through_its_own_lease(
    sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    # given a leading epoch 1 with a live lease, when it restarts and claims what it reads
    led_by_a(sets, partition, cluster, clock)
    clock.advance(1)
    again = sets.claim(partition, "a", 1, ms(clock), LEASE_MS)
    # then it leads a new epoch, and its previous run's epoch is fenced
    assert (again.leader, again.epoch) == ("a", 2)
    with pytest.raises(Fenced):
        sets.renew(partition, "a", 1, ms(clock), LEASE_MS)


def race_to_claim(settings: Settings, partition: int, workers: list[str], now_ms: int) -> dict[str, object]:
    """Each worker, with a client of its own, claims epoch 2 at the same moment; what each one got."""
    start = threading.Barrier(len(workers))

    def claim(worker: str) -> tuple[str, object]:
        own = ReplicaSets.from_settings(settings)
        start.wait()
        try:
            return worker, own.claim(partition, worker, 1, now_ms, LEASE_MS)
        except Fenced as exc:
            return worker, exc

    with ThreadPoolExecutor(len(workers)) as pool:
        return dict(pool.map(claim, workers))


def test_of_two_in_sync_replicas_claiming_at_once_exactly_one_wins(
    aws_settings: Settings, sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    for p in range(partition, partition + 5):
        # given b and c, both in sync, seeing a's lease of epoch 1 lapsed (it never had one)
        sets.create(p, cluster, ["a", "b", "c"], Acks.MAJORITY)
        # when both claim epoch 2 at the same moment
        outcomes = race_to_claim(aws_settings, p, ["b", "c"], ms(clock))
        # then one holds epoch 2 and the other was fenced by it
        winners = [w for w, o in outcomes.items() if isinstance(o, ReplicaSet)]
        assert len(winners) == 1, outcomes
        loser = next(o for o in outcomes.values() if isinstance(o, Fenced))
        final = sets.get(p)
        assert final is not None and (final.leader, final.epoch) == (winners[0], 2)
        assert loser.current == final


# --- in-sync set and reassignment --------------------------------------------------------------------


def test_the_leader_can_never_leave_its_own_in_sync_set(
    sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    leading = led_by_a(sets, partition, cluster, clock)
    with pytest.raises(LeaderMustStay):
        sets.shrink_isr(partition, "a", 1, ["a", "b"])
    with pytest.raises(LeaderMustStay) as refused:
        sets.reassign(partition, 1, ["b", "c", "d"], previous=["a", "b", "c"])
    assert refused.value.current == leading
    assert sets.get(partition) == leading


def test_the_leader_shrinks_and_expands_within_the_assigned_replicas(
    sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    led_by_a(sets, partition, cluster, clock)
    assert sets.shrink_isr(partition, "a", 1, ["b", "c"]).isr == {"a"}
    assert sets.expand_isr(partition, "a", 1, ["c"]).isr == {"a", "c"}
    # a worker not assigned to the partition is refused, with what the item holds
    with pytest.raises(NotAReplica) as refused:
        sets.expand_isr(partition, "a", 1, ["b", "x"])
    assert refused.value.current is not None and refused.value.current.isr == {"a", "c"}
    # and repeating a change is harmless: a retried request lands on the same set
    assert sets.expand_isr(partition, "a", 1, ["b"]).isr == {"a", "b", "c"}
    assert sets.expand_isr(partition, "a", 1, ["b"]).isr == {"a", "b", "c"}


def test_the_lease_does_not_fence_the_leader_only_the_epoch_does(
    sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    # given a's lease has lapsed but nobody has claimed: a is still the only writer of epoch 1
    led_by_a(sets, partition, cluster, clock)
    clock.advance(60)
    assert sets.shrink_isr(partition, "a", 1, ["c"]).isr == {"a", "b"}
    assert sets.renew(partition, "a", 1, ms(clock), LEASE_MS).lease_until == ms(clock) + LEASE_MS


def test_reassign_replaces_a_replica_and_the_in_sync_set_keeps_only_the_assigned(
    sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    led_by_a(sets, partition, cluster, clock)
    # when the manager replaces c by d
    moved = sets.reassign(partition, 1, ["a", "b", "d"], previous=["a", "b", "c"])
    # then c leaves the in-sync set, and d joins it only when the leader adds it
    assert (moved.replicas, moved.isr, moved.epoch, moved.leader) == (("a", "b", "d"), {"a", "b"}, 1, "a")
    with pytest.raises(NotAReplica):
        sets.expand_isr(partition, "a", 1, ["c"])
    assert sets.expand_isr(partition, "a", 1, ["d"]).isr == {"a", "b", "d"}


def test_reassign_is_fenced_by_the_epoch_and_the_replica_set_it_read(
    sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    led_by_a(sets, partition, cluster, clock)
    clock.advance(60)
    sets.claim(partition, "b", 1, ms(clock), LEASE_MS)
    with pytest.raises(Fenced):
        sets.reassign(partition, 1, ["a", "b", "d"], previous=["a", "b", "c"])
    # the current epoch, but a replica set that is no longer there
    with pytest.raises(Fenced):
        sets.reassign(partition, 2, ["a", "b", "d"], previous=["a", "b", "e"])
    after = sets.get(partition)
    assert after is not None and after.replicas == ("a", "b", "c") and after.isr == {"a", "b", "c"}


def test_every_change_to_a_partition_without_a_replica_set_is_refused(
    aws_settings: Settings, sets: ReplicaSets, partition: int
) -> None:
    # an item only a worker of before replica sets wrote counts as no replica set as well
    address_item(session.client("dynamodb", aws_settings), aws_settings.partitions_table, partition + 1, "old",
                "127.0.0.1", 7001, 1)
    changes: list[Callable[[int], object]] = [
        lambda p: sets.claim(p, "a", 1, 0, LEASE_MS),
        lambda p: sets.renew(p, "a", 1, 0, LEASE_MS),
        lambda p: sets.shrink_isr(p, "a", 1, ["b"]),
        lambda p: sets.expand_isr(p, "a", 1, ["b"]),
        lambda p: sets.reassign(p, 1, ["a"], previous=["a", "b"]),
    ]
    for p in (partition, partition + 1):
        for change in changes:
            with pytest.raises(NoSuchPartition):
                change(p)
    assert sets.get(partition) is None and sets.get(partition + 1) is None


# --- lost answers, other backends, outages -----------------------------------------------------------


class TwiceSent:
    """A DynamoDB client whose update_item lands, then is sent again as a retry after a lost answer."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def update_item(self, **kwargs: Any) -> Any:
        self._client.update_item(**kwargs)
        return self._client.update_item(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


class NoOldImage:
    """A DynamoDB client whose refusals do not carry the item, as with backends that ignore
    ReturnValuesOnConditionCheckFailure."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def update_item(self, **kwargs: Any) -> Any:
        try:
            return self._client.update_item(**kwargs)
        except self._client.exceptions.ConditionalCheckFailedException as exc:
            exc.response.pop("Item", None)
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_claim_or_reassignment_whose_answer_was_lost_is_still_won(
    aws_settings: Settings, sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    led_by_a(sets, partition, cluster, clock)
    clock.advance(60)
    retried = ReplicaSets(TwiceSent(session.client("dynamodb", aws_settings)), aws_settings.partitions_table)
    claimed = retried.claim(partition, "b", 1, ms(clock), LEASE_MS)
    assert (claimed.leader, claimed.epoch) == ("b", 2)
    moved = retried.reassign(partition, 2, ["a", "b", "d"], previous=["a", "b", "c"])
    assert (moved.replicas, moved.isr) == (("a", "b", "d"), {"a", "b"})
    assert sets.get(partition) == moved


def test_a_refusal_without_the_item_is_explained_from_a_fresh_read(
    aws_settings: Settings, sets: ReplicaSets, partition: int, cluster: str, clock: ManualClock
) -> None:
    leading = led_by_a(sets, partition, cluster, clock)
    plain = ReplicaSets(NoOldImage(session.client("dynamodb", aws_settings)), aws_settings.partitions_table)
    with pytest.raises(LeaseHeld) as refused:
        plain.claim(partition, "b", 1, ms(clock), LEASE_MS)
    assert refused.value.current == leading
    with pytest.raises(NoSuchPartition):
        plain.claim(partition + 1, "b", 1, ms(clock), LEASE_MS)


def test_an_unreachable_dynamodb_or_a_missing_table_is_service_unavailable(aws_settings: Settings) -> None:
    client = unreachable_dynamodb()
    unreachable = ReplicaSets(client, aws_settings.partitions_table)
    with pytest.raises(ServiceUnavailable):
        unreachable.get(0)
    with pytest.raises(ServiceUnavailable):
        unreachable.claim(0, "a", 1, 0, LEASE_MS)
    missing = ReplicaSets.from_settings(aws_settings.with_(table_prefix="no-such-prefix-"))
    with pytest.raises(ServiceUnavailable):
        missing.create(0, "c", ["a"], Acks.LEADER)


def test_arguments_that_break_the_invariants_are_refused_before_any_write(
    sets: ReplicaSets, partition: int, cluster: str
) -> None:
    for bad in ([], ["a", "a"], ["a", ""]):
        with pytest.raises(ValueError):
            sets.create(partition, cluster, bad, Acks.MAJORITY)
    with pytest.raises(ValueError):
        sets.create(partition, cluster, ["a"], "most")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        sets.claim(partition, "a", 1, 0, 0)
    with pytest.raises(ValueError):
        sets.shrink_isr(partition, "a", 1, [])
    assert sets.get(partition) is None
