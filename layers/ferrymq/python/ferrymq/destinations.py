"""Where a queue's messages live and what storing one there needs, read from its catalog record.

The front end sends this to a storage worker (the dead-letter queue of a receive, the destination of a move
task) and a worker finds it for itself (the source queue of a dead letter); both read the record here, so a
queue's type and retention are decided by one rule on both sides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ferrymq.limits import DEFAULT_RETENTION_SECONDS

if TYPE_CHECKING:
    # Not at run time: a worker that never hands a message over never loads botocore.
    from ferrymq.aws.queue_store import QueueRecord

FIFO_SUFFIX = ".fifo"

DESTINATION_FIELDS = ("queue_id", "partition", "fifo", "arn", "retention_seconds")
"""Keys of a move task's ``destination`` map in the worker RPC."""


def is_fifo(name: str) -> bool:
    """Whether the queue called ``name`` is a FIFO queue: SQS makes the type part of the name."""
    return name.endswith(FIFO_SUFFIX)


def retention_seconds(attributes: Mapping[str, str]) -> int:
    """A stored queue's MessageRetentionPeriod."""
    value = attributes.get("MessageRetentionPeriod")
    return int(value) if value is not None else DEFAULT_RETENTION_SECONDS


@dataclass(frozen=True, slots=True)
class QueueTarget:
    """Where a queue's messages live, and what storing one there needs."""

    queue_id: str
    partition: int
    fifo: bool
    retention_seconds: int
    arn: str

    def as_wire(self) -> dict[str, Any]:
        """The ``destination`` map of a move task in the worker RPC."""
        return {
            "queue_id": self.queue_id,
            "partition": self.partition,
            "fifo": self.fifo,
            "arn": self.arn,
            "retention_seconds": self.retention_seconds,
        }

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> QueueTarget:
        return cls(str(d["queue_id"]), int(d["partition"]), bool(d["fifo"]), int(d["retention_seconds"]), str(d["arn"]))


def target_of(record: QueueRecord, arn: str) -> QueueTarget:
    """The destination of the queue ``record`` describes; ``arn`` is its ARN."""
    return QueueTarget(record.queue_id, record.partition, is_fifo(record.name), retention_seconds(record.attributes),
                       arn)


def redrive_option(dlq: QueueTarget, *, max_receive_count: int, source_arn: str) -> dict[str, Any]:
    """The ``redrive`` option of a receive from the queue ``source_arn``, whose dead-letter queue is ``dlq``."""
    return {
        "max_receive_count": max_receive_count,
        "dlq_queue_id": dlq.queue_id,
        "dlq_partition": dlq.partition,
        "dlq_fifo": dlq.fifo,
        "source_arn": source_arn,
        "dlq_retention_seconds": dlq.retention_seconds,
    }
