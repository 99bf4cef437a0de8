"""PartitionMap against a real DynamoDB API (moto's server, or FERRYMQ_TEST_AWS_ENDPOINT)."""

from __future__ import annotations

import pytest

from ferrymq.aws.partitions import PartitionMap, WorkerAddress
from ferrymq.aws.replica_sets import ReplicaSets
from ferrymq.errors import ServiceUnavailable
from ferrymq.replication_rules import Acks
from ferrymq.settings import Settings
from tests.support.aws_clients import unreachable_dynamodb


def test_lookup_reads_the_address_the_leader_s_claim_published(aws_settings: Settings) -> None:
    partitions = PartitionMap.from_settings(aws_settings)
    sets = ReplicaSets.from_settings(aws_settings)
    assert partitions.lookup(101) is None
    # a replica set nobody claimed yet has no address to go to
    created = sets.create(101, "lookup", ["w-a", "w-b"], Acks.MAJORITY)
    assert partitions.lookup(101) is None
    # each claim publishes its worker's address with its epoch
    sets.claim(101, "w-a", created.epoch, 1_000, 5_000, ("127.0.0.1", 7001))
    sets.claim(101, "w-b", created.epoch + 1, 10_000, 5_000, ("127.0.0.2", 7002))
    assert partitions.lookup(101) == WorkerAddress("w-b", "127.0.0.2", 7002, created.epoch + 2, partition=101)
    sets.create(100, "lookup", ["w-c"], Acks.LEADER)
    sets.claim(100, "w-c", 1, 1_000, 5_000, ("127.0.0.1", 7003))
    listed = [a for a in partitions.all() if a.partition in (100, 101)]
    assert [(a.partition, a.worker_id) for a in listed] == [(100, "w-c"), (101, "w-b")]


def test_unreachable_dynamodb_is_service_unavailable(aws_settings: Settings) -> None:
    client = unreachable_dynamodb()
    partitions = PartitionMap(client, aws_settings.partitions_table)
    with pytest.raises(ServiceUnavailable):
        partitions.lookup(0)
    with pytest.raises(ServiceUnavailable):
        partitions.receipt_key(0)


def test_a_missing_table_is_service_unavailable(aws_settings: Settings) -> None:
    partitions = PartitionMap.from_settings(aws_settings.with_(table_prefix="no-such-prefix-"))
    with pytest.raises(ServiceUnavailable):
        partitions.lookup(0)


def test_receipt_key_is_made_once_and_outlives_the_partitions_workers(aws_settings: Settings) -> None:
    # Given a partition nobody asked a key for yet
    partitions = PartitionMap.from_settings(aws_settings)
    # When two workers ask for it, the partition changing hands in between
    first = partitions.receipt_key(103)
    assert partitions.lookup(103) is None, "a key alone is not a leader's address"
    sets = ReplicaSets.from_settings(aws_settings)
    created = sets.create(103, "keys", ["w-a", "w-b"], Acks.MAJORITY)
    sets.claim(103, "w-a", created.epoch, 1_000, 5_000, ("127.0.0.1", 7001))
    sets.claim(103, "w-b", created.epoch + 1, 10_000, 5_000, ("127.0.0.1", 7002))
    second = PartitionMap.from_settings(aws_settings).receipt_key(103)
    # Then both got the same random 32 bytes, and another partition has its own
    assert first == second and len(first) == 32
    assert partitions.receipt_key(104) != first
    assert [a.partition for a in partitions.all()].count(103) == 1
