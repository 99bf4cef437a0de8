"""A queue's destination read from its catalog record: the same for the front end (which sends it to a worker)
and for a worker (which looks it up itself)."""

from __future__ import annotations

import asyncio

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.clock import ManualClock
from ferrymq.destinations import (
    DESTINATION_FIELDS,
    QueueTarget,
    is_fifo,
    redrive_option,
    retention_seconds,
    target_of,
)
from ferrymq.limits import DEFAULT_RETENTION_SECONDS
from ferrymq.rpc.codec import REDRIVE_FIELDS
from ferrymq.storage import peers
from ferrymq.storage.peers import ClusterPeers

ARN = "arn:aws:sqs:us-east-1:000000000000:{}"


def record(name: str, **attributes: str) -> QueueRecord:
    return QueueRecord(account="000000000000", name=name, queue_id=f"id-{name}", partition=3, attributes=attributes)


def test_a_fifo_queue_is_told_by_its_name_and_keeps_its_retention() -> None:
    # given a FIFO queue that keeps messages for two minutes
    queue = record("orders.fifo", MessageRetentionPeriod="120")
    # when its destination is read
    target = target_of(queue, ARN.format("orders.fifo"))
    # then it names the queue, its partition, its type and its retention
    assert target == QueueTarget("id-orders.fifo", 3, True, 120, ARN.format("orders.fifo"))


def test_a_queue_without_a_retention_period_keeps_messages_for_the_sqs_default() -> None:
    target = target_of(record("plain"), ARN.format("plain"))
    assert (target.fifo, target.retention_seconds) == (False, DEFAULT_RETENTION_SECONDS)
    assert retention_seconds({}) == 345_600


def test_only_the_suffix_makes_a_fifo_queue() -> None:
    assert is_fifo("a.fifo")
    assert not is_fifo("a.fifo-copy")
    assert not is_fifo("fifo")


def test_a_move_task_destination_travels_as_the_map_the_worker_checks() -> None:
    # given a destination
    target = QueueTarget("id-q", 7, True, 600, ARN.format("q.fifo"))
    # when it is put on the wire and read back
    wire = target.as_wire()
    # then the map has exactly the destination fields, and reads back as the same destination
    assert tuple(wire) == DESTINATION_FIELDS
    assert QueueTarget.from_wire(wire) == target


def test_a_redrive_option_carries_the_dead_letter_queue_and_the_source() -> None:
    dlq = target_of(record("dead", MessageRetentionPeriod="1209600"), ARN.format("dead"))
    option = redrive_option(dlq, max_receive_count=4, source_arn=ARN.format("work"))
    assert set(option) == set(REDRIVE_FIELDS)
    assert option == {
        "max_receive_count": 4,
        "dlq_queue_id": "id-dead",
        "dlq_partition": 3,
        "dlq_fifo": False,
        "source_arn": ARN.format("work"),
        "dlq_retention_seconds": 1_209_600,
    }


class _Catalog:
    def __init__(self, queue: QueueRecord) -> None:
        self.queue = queue

    def get(self, account: str, name: str) -> QueueRecord | None:
        return self.queue if (account, name) == (self.queue.account, self.queue.name) else None


def test_a_worker_finds_the_destination_the_front_end_would_send() -> None:
    # given a FIFO queue without a retention period in the catalog a worker reads
    queue = record("jobs.fifo")
    cluster = ClusterPeers(partition_map=lambda: None, queue_store=lambda: _Catalog(queue), clock=ManualClock())
    # when the worker looks it up by its ARN
    found = asyncio.run(cluster.queue(ARN.format("jobs.fifo")))
    # then it is the destination the front end builds from the same record
    assert found == target_of(queue, ARN.format("jobs.fifo"))
    assert peers.QueueTarget is QueueTarget
