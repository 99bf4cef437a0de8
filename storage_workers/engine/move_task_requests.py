"""The message move task requests of the engine: start, list and cancel (the SQS actions), and the steps the
worker's mover (:mod:`ferrymq.storage.move_tasks`) takes: find the next messages, move them, end the task.

:class:`MoveTaskRequests` is mixed into :class:`~.engine.Engine`, so these are Engine methods; like every
request they read the partition state, decide, and emit records through ``_commit``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ferrymq.errors import InvalidParameterValue, ResourceNotFound
from ferrymq.storage.engine.answers import ACTIVE_TASK_MESSAGE, NO_SUCH_TASK_MESSAGE
from ferrymq.storage.engine.fifo import FifoQueue
from ferrymq.storage.engine.messages import READY, QueueState
from ferrymq.storage.engine.records import BATCH, STORED, TASK_MOVED, TASK_STARTED, TASK_STATUS, Record
from ferrymq.storage.engine.rows import outgoing, stored_item
from ferrymq.storage.engine.state import PartitionState
from ferrymq.storage.engine.tasks import ACTIVE, CANCELLING, KEPT_TASKS, RUNNING, MoveTask, Outgoing, moved_copy


class MoveTaskRequests:
    """Move task requests over ``partition``; the class they are mixed into provides the three below."""

    partition: PartitionState
    now_ms: Callable[[], int]
    _commit: Callable[[Record], None]

    def start_move_task(self, queue_id: str, task: Mapping[str, Any]) -> dict[str, Any]:
        """Start moving the messages now in the queue; returns the task as :meth:`list_move_tasks` shows it.

        Starting a task whose handle the queue already has returns that task (a retried start).
        """
        handle = str(task["task_handle"])
        q = self.partition.queues.get(queue_id)
        if q is not None:
            for existing in q.tasks:
                if existing.handle == handle:
                    return existing.listing()
            if any(t.status in ACTIVE for t in q.tasks):
                raise InvalidParameterValue(ACTIVE_TASK_MESSAGE)
        max_per_second = task.get("max_per_second")
        self._commit(
            (
                TASK_STARTED,
                queue_id,
                handle,
                str(task["source_arn"]),
                dict(task["destination"]) if task.get("destination") is not None else None,
                int(max_per_second) if max_per_second is not None else None,
                int(task.get("started_ts") or self.now_ms()),
                self.partition.next_seq,
                len(q.msgs) if q is not None else 0,
            )
        )
        found = self.move_task(queue_id, handle)
        assert found is not None
        return found.listing()

    def list_move_tasks(self, queue_id: str) -> list[dict[str, Any]]:
        """The queue's last tasks, most recent first."""
        q = self.partition.queues.get(queue_id)
        if q is None:
            return []
        return [t.listing() for t in reversed(q.tasks[-KEPT_TASKS:])]

    def cancel_move_task(self, queue_id: str, handle: str) -> int:
        """Ask a running task to stop; returns how many messages it has moved so far."""
        task = self.move_task(queue_id, handle)
        if task is None or task.status != RUNNING:
            raise ResourceNotFound(NO_SUCH_TASK_MESSAGE)
        self._commit((TASK_STATUS, queue_id, handle, CANCELLING, None))
        return task.moved

    def move_task(self, queue_id: str, handle: str) -> MoveTask | None:
        return self.partition.move_task(queue_id, handle)

    def active_move_tasks(self) -> list[tuple[str, str]]:
        """``(queue_id, handle)`` of every task RUNNING or CANCELLING (what a restarted worker resumes)."""
        return [(qid, t.handle) for qid, q in self.partition.queues.items() for t in q.tasks if t.status in ACTIVE]

    def move_candidates(self, queue_id: str, handle: str, n: int) -> list[Outgoing]:
        """Up to ``n`` of the task's messages that are visible now, oldest first, as they are in this queue.

        Messages in flight (a consumer has them) wait; in a FIFO queue so do the later messages of their group.
        """
        q = self.partition.queues.get(queue_id)
        task = self.move_task(queue_id, handle)
        if q is None or task is None:
            return []
        q.release_due(self.now_ms())
        msgs = q.msgs
        out: list[Outgoing] = []
        blocked: set[str] = set()
        for seq in _pending(q, task):
            m = msgs.get(seq)
            if m is None:
                continue
            if isinstance(q, FifoQueue):
                name = m.group or ""
                if name in blocked:
                    continue
                if m.state != READY or q.groups.in_flight(name):
                    blocked.add(name)
                    continue
            elif m.state != READY:
                continue
            out.append(outgoing(m))
            if len(out) >= n:
                break
        return out

    def move_remaining(self, queue_id: str, handle: str) -> int:
        """How many of the task's messages are still in the queue."""
        q = self.partition.queues.get(queue_id)
        task = self.move_task(queue_id, handle)
        if q is None or task is None:
            return 0
        msgs = q.msgs
        return sum(1 for seq in _pending(q, task) if seq in msgs)

    def move_locally(
        self, queue_id: str, handle: str, seqs: Sequence[int], dest_queue_id: str, dest_fifo: bool
    ) -> None:
        """Move these messages of the task to a queue of this partition, in one record."""
        partition = self.partition
        q = partition.queues.get(queue_id)
        if q is None:
            return
        now = self.now_ms()
        copies = [moved_copy(outgoing(m), handle) for seq in seqs if (m := q.msgs.get(seq)) is not None]
        if not copies:
            return
        dest = partition.queues.get(dest_queue_id)
        items = [stored_item(c, now) for c in copies if dest is None or dest.resend_of(c.id, now) is None]
        records: list[Record] = []
        if items:
            records.append((STORED, dest_queue_id, now, partition.next_seq, dest_fifo, items))
        records.append((TASK_MOVED, queue_id, handle, [c.seq for c in copies]))
        self._commit((BATCH, records))

    def moved(self, queue_id: str, handle: str, seqs: Sequence[int]) -> None:
        """Messages of the task another worker acknowledged leave this queue."""
        if seqs:
            self._commit((TASK_MOVED, queue_id, handle, list(seqs)))

    def end_move_task(self, queue_id: str, handle: str, status: str, failure_reason: str | None = None) -> None:
        if self.move_task(queue_id, handle) is not None:
            self._commit((TASK_STATUS, queue_id, handle, status, failure_reason))


def _pending(q: QueueState, task: MoveTask) -> deque[int]:
    """The task's sequence numbers still to look at, built from the queue the first time it is needed."""
    pending = task.pending
    if pending is None:
        pending = task.pending = deque(seq for seq in q.msgs if seq < task.limit_seq)
    msgs = q.msgs
    while pending and pending[0] not in msgs:
        pending.popleft()
    return pending
