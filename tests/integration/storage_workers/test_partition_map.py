"""PartitionMap against a real DynamoDB API (moto's server, or FERRYMQ_TEST_AWS_ENDPOINT)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ferrymq.aws.partitions import PartitionMap, WorkerAddress
from ferrymq.errors import ServiceUnavailable
from ferrymq.settings import Settings
from tests.support.aws_clients import unreachable_dynamodb


def test_register_bumps_the_epoch_and_lookup_reads_it(aws_settings: Settings) -> None:
    partitions = PartitionMap.from_settings(aws_settings)
    assert partitions.lookup(101) is None
    assert partitions.register(101, "w-a", "127.0.0.1", 7001) == 1
    assert partitions.register(101, "w-b", "127.0.0.2", 7002) == 2
    assert partitions.lookup(101) == WorkerAddress("w-b", "127.0.0.2", 7002, 2, partition=101)
    partitions.register(100, "w-c", "127.0.0.1", 7003)
    listed = [a for a in partitions.all() if a.partition in (100, 101)]
    assert [(a.partition, a.worker_id) for a in listed] == [(100, "w-c"), (101, "w-b")]


def test_workers_racing_for_a_partition_get_distinct_epochs(aws_settings: Settings) -> None:
    partitions = PartitionMap.from_settings(aws_settings)
    with ThreadPoolExecutor(4) as pool:
        epochs = list(pool.map(lambda i: partitions.register(102, f"w-{i}", "127.0.0.1", 8000 + i), range(4)))
    assert sorted(epochs) == [1, 2, 3, 4]
    final = partitions.lookup(102)
    assert final is not None and final.epoch == 4


def test_unreachable_dynamodb_is_service_unavailable(aws_settings: Settings) -> None:
    client = unreachable_dynamodb()
    partitions = PartitionMap(client, aws_settings.partitions_table)
    with pytest.raises(ServiceUnavailable):
        partitions.lookup(0)
    with pytest.raises(ServiceUnavailable):
        partitions.register(0, "w", "127.0.0.1", 1)


def test_a_missing_table_is_service_unavailable(aws_settings: Settings) -> None:
    partitions = PartitionMap.from_settings(aws_settings.with_(table_prefix="no-such-prefix-"))
    with pytest.raises(ServiceUnavailable):
        partitions.lookup(0)


def test_receipt_key_is_made_once_and_outlives_the_partitions_workers(aws_settings: Settings) -> None:
    # Given a partition nobody asked a key for yet
    partitions = PartitionMap.from_settings(aws_settings)
    # When two workers ask for it, one registering in between
    first = partitions.receipt_key(103)
    assert partitions.lookup(103) is None, "a key alone is not a registered worker"
    assert partitions.register(103, "w-a", "127.0.0.1", 7001) == 1
    assert partitions.register(103, "w-b", "127.0.0.1", 7002) == 2
    second = PartitionMap.from_settings(aws_settings).receipt_key(103)
    # Then both got the same random 32 bytes, and another partition has its own
    assert first == second and len(first) == 32
    assert partitions.receipt_key(104) != first
    assert [a.partition for a in partitions.all()].count(103) == 1
