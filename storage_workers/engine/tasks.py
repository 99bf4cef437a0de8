"""Message move tasks (StartMessageMoveTask): their state in the engine, and what a moved message becomes.

A task moves the messages that were in its source queue (a dead-letter queue) when it started: those whose
sequence number is below ``limit_seq``.  The engine only keeps the task's state; the worker's mover (see
:mod:`ferrymq.storage.move_tasks`) asks the engine for the next messages, hands them to their destination
and records each step, so a restarted worker carries on where the log says the task stood.

A moved message is a new message in its destination, as in SQS: a new message id (derived from the task
handle and the old id, so that handing the same message over twice is recognised as a resend), a fresh
enqueue time, a receive count of 0, and no ``DeadLetterQueueSourceArn``.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Mapping
from typing import Any, NamedTuple

from ferrymq.limits import MAX_LISTED_MOVE_TASKS

RUNNING = "RUNNING"
COMPLETED = "COMPLETED"
CANCELLING = "CANCELLING"
CANCELLED = "CANCELLED"
FAILED = "FAILED"
ACTIVE = frozenset({RUNNING, CANCELLING})

KEPT_TASKS = MAX_LISTED_MOVE_TASKS
"""ListMessageMoveTasks shows at most the last ten tasks of a queue."""

DLQ_SOURCE_ARN = "DeadLetterQueueSourceArn"
NO_SOURCE = "CouldNotDetermineMessageSource"
NO_QUEUE = "AWS.SimpleQueueService.NonExistentQueue"
INTERNAL_FAILURE = "AWS.SimpleQueueService.InternalError"

_MOVED_IDS = uuid.UUID("6f1d3a52-3c57-4b1e-9a8e-0c5f7d2e4b91")


class Outgoing(NamedTuple):
    """A message as it leaves its queue for another one (dead-letter redrive or a move task).

    ``seq`` is its sequence number in the queue it leaves; ``sent_ts`` None means "now, wherever it lands".
    """

    seq: int
    id: str
    body: str
    attrs: dict
    md5_body: str
    md5_attrs: str | None
    system: dict
    sent_ts: int | None
    receive_count: int
    first_receive_ts: int
    group: str | None
    dedup_id: str | None


def moved_message_id(task_handle: str, message_id: str) -> str:
    return str(uuid.uuid5(_MOVED_IDS, f"{task_handle}/{message_id}"))


def moved_copy(original: Outgoing, task_handle: str) -> Outgoing:
    """The new message a move task puts in the destination for ``original``."""
    system = {k: v for k, v in original.system.items() if k != DLQ_SOURCE_ARN}
    return original._replace(
        id=moved_message_id(task_handle, original.id),
        system=system,
        sent_ts=None,
        receive_count=0,
        first_receive_ts=0,
    )


class MoveTask:
    __slots__ = (
        "destination",
        "failure_reason",
        "handle",
        "limit_seq",
        "max_per_second",
        "moved",
        "pending",
        "source_arn",
        "started_ts",
        "status",
        "to_move",
    )

    def __init__(
        self,
        handle: str,
        source_arn: str,
        destination: Mapping[str, Any] | None,
        max_per_second: int | None,
        started_ts: int,
        limit_seq: int,
        to_move: int,
        moved: int = 0,
        status: str = RUNNING,
        failure_reason: str | None = None,
    ) -> None:
        self.handle = handle
        self.source_arn = source_arn
        self.destination = dict(destination) if destination is not None else None
        self.max_per_second = max_per_second
        self.started_ts = started_ts
        self.limit_seq = limit_seq
        self.to_move = to_move
        self.moved = moved
        self.status = status
        self.failure_reason = failure_reason
        # Sequence numbers still to look at, in order; built from the queue when first needed (not logged:
        # it follows from the queue's messages and limit_seq).
        self.pending: deque[int] | None = None

    def as_record(self) -> list:
        return [
            self.handle,
            self.source_arn,
            self.destination,
            self.max_per_second,
            self.started_ts,
            self.limit_seq,
            self.to_move,
            self.moved,
            self.status,
            self.failure_reason,
        ]

    @classmethod
    def from_record(cls, fields: list | tuple) -> MoveTask:
        return cls(*fields)

    def listing(self) -> dict[str, Any]:
        return {
            "task_handle": self.handle,
            "status": self.status,
            "source_arn": self.source_arn,
            "destination_arn": self.destination.get("arn") if self.destination is not None else None,
            "max_per_second": self.max_per_second,
            "moved": self.moved,
            "to_move": self.to_move,
            "failure_reason": self.failure_reason,
            "started_ts": self.started_ts,
        }
