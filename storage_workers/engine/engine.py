"""The queue engine: message state of every queue of a partition as a pure state machine fed by records.

Requests (``send``, ``store``, ``poll``, ...) read the state, decide, and turn every change into a record
(see :mod:`.records`) that goes through :meth:`Engine.apply` and then to ``on_record`` (the log).
Recovery, followers and compaction call :meth:`Engine.apply` with the same records, so they reach the same
state.  The engine takes time from an injected :class:`~ferrymq.clock.Clock`, and records carry their
timestamps.  Standard queues are :class:`~.messages.QueueState`, FIFO queues :class:`~.fifo.FifoQueue`.

What the engine cannot do itself it hands back to the worker: messages to dead-letter into a queue that
another worker leads (``Polled.dead_letters``, held in flight meanwhile), and the messages a move task is to
hand over.  Handing a message over is idempotent by message id: a queue remembers the ids it stored through
:meth:`Engine.store` for ``RESEND_WINDOW_MS`` and answers a resend with the original's result.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from ferrymq.clock import Clock
from ferrymq.errors import (
    InvalidParameterValue,
    MessageNotInflight,
    OverLimit,
    ReceiptHandleIsInvalid,
    ResourceNotFound,
)
from ferrymq.message_fields import FIFO_RECEIVED_MESSAGE_FIELDS, RECEIVED_MESSAGE_FIELDS
from storage_workers.engine import receipts
from storage_workers.engine.fifo import Attempt, FifoQueue
from storage_workers.engine.messages import DELAYED, IN_FLIGHT, READY, Message, QueueState
from storage_workers.engine.records import (
    ATTEMPTS,
    BATCH,
    DELETED,
    DROPPED,
    EXPIRED,
    PURGED,
    QUEUE_META,
    RECEIVED,
    RENEWED,
    RESENDS,
    RESTORED,
    SENT,
    SEQUENCE,
    STORED,
    TASK_MOVED,
    TASK_STARTED,
    TASK_STATUS,
    VISIBILITY,
    Record,
)
from storage_workers.engine.tasks import (
    ACTIVE,
    CANCELLING,
    DLQ_SOURCE_ARN,
    KEPT_TASKS,
    RUNNING,
    MoveTask,
    Outgoing,
    moved_copy,
)

RECEIVED_FIELDS = RECEIVED_MESSAGE_FIELDS
"""Order of the tuples :meth:`Engine.receive` returns for standard queues; the worker sends them on as they are."""

FIFO_RECEIVED_FIELDS = FIFO_RECEIVED_MESSAGE_FIELDS
"""Order of the tuples returned for FIFO queues."""

RESEND_WINDOW_MS = 5 * 60 * 1000
"""How long a stored message id makes a resend of it a duplicate."""

TRANSFER_HOLD_SECONDS = 10
"""How long a message being handed to another worker stays invisible, by default; if the hand-over does not
finish (the other worker is down, or this one crashed), the message becomes visible again and the next
receive or mover tries once more."""

MAX_DEAD_LETTERS_PER_RECEIVE = 100

OVER_LIMIT_MESSAGE = (
    "Too many messages have been received without being deleted. "
    "Please delete your received messages or let them timeout before receiving more."
)

_SNAPSHOT_CHUNK = 256
_META_CHUNK = 4096
_NOT_INFLIGHT = (MessageNotInflight.code, "The message referred to isn't in flight.")
_ACTIVE_TASK = (
    "There is already a task running. Only one active task is allowed for a source queue arn at a given time."
)

BatchResult = tuple[str, str] | None


class Redrive(NamedTuple):
    """A source queue's redrive policy, resolved by the worker for one receive."""

    max_receive_count: int
    dlq_queue_id: str
    dlq_fifo: bool
    source_arn: str
    local: bool
    """Whether this worker leads the dead-letter queue's partition (then the move is one record)."""


class Polled(NamedTuple):
    rows: list[tuple]
    """The messages received, as tuples ordered like RECEIVED_FIELDS or FIFO_RECEIVED_FIELDS."""
    dead_letters: list[Outgoing]
    """Messages to hand to a dead-letter queue on another worker (now held in flight), already as the DLQ
    is to store them; remove each with :meth:`Engine.handed_over` once the DLQ acknowledged it."""


class Engine:
    """Message state of every queue of one partition."""

    def __init__(self, clock: Clock, on_record: Callable[[Record], None] | None = None) -> None:
        self.clock = clock
        self.on_record = on_record
        self.queues: dict[str, QueueState] = {}
        self.next_seq = 1
        self.live_bytes = 0
        """Rough size of the live messages, to tell when the log is worth compacting."""
        self.transfer_hold_seconds = TRANSFER_HOLD_SECONDS

    @classmethod
    def replay(cls, clock: Clock, records: Iterable[Record]) -> Engine:
        engine = cls(clock)
        apply = engine.apply
        for record in records:
            apply(record)
        return engine

    # --- requests: read, decide, record ------------------------------------------------------------

    def now_ms(self) -> int:
        return int(self.clock.now() * 1000)

    def _commit(self, record: Record) -> None:
        self.apply(record)
        if self.on_record is not None:
            self.on_record(record)

    def is_fifo(self, queue_id: str) -> bool:
        q = self.queues.get(queue_id)
        return q is not None and q.fifo

    def send(self, queue_id: str, messages: Sequence[Sequence[Any]], retention_seconds: int) -> int:
        """Store messages of a standard queue given as ``(id, body, attrs, md5_body, md5_attrs, delay, system)``;
        returns their sent_ts."""
        now = self.now_ms()
        if not messages:
            return now
        q = self.queues.get(queue_id)
        if q is not None and q.order:
            self._expire(q, now, retention_seconds)
        self._commit((SENT, queue_id, now, self.next_seq, messages))
        return now

    def store(
        self, queue_id: str, messages: Sequence[Sequence[Any]], retention_seconds: int, *, fifo: bool
    ) -> list[tuple[str, int, int, bool]]:
        """Store messages idempotently by id; returns ``(id, sent_ts, seq, duplicate)`` for each.

        Messages are ``(id, body, attrs, md5_body, md5_attrs, delay, system, group, dedup_id, origin)``;
        ``origin`` is None for a new message, or ``(sent_ts | None, receive_count, first_receive_ts)`` for one
        handed over from another queue.  A message whose id the queue stored less than RESEND_WINDOW_MS ago is
        not stored again: its result is the original's, with ``duplicate`` true.
        """
        now = self.now_ms()
        q = self.queues.get(queue_id)
        if q is not None and q.order:
            self._expire(q, now, retention_seconds)
        recent = q.recent if q is not None else {}
        cutoff = now - RESEND_WINDOW_MS
        seq = self.next_seq
        items: list[tuple] = []
        results: list[tuple[str, int, int, bool]] = []
        in_batch: dict[str, tuple[int, int]] = {}
        for message_id, body, attrs, md5_body, md5_attrs, delay, system, group, dedup_id, origin in messages:
            known = recent.get(message_id)
            if known is not None and known[2] > cutoff:
                results.append((message_id, known[1], known[0], True))
                continue
            first = in_batch.get(message_id)
            if first is not None:
                results.append((message_id, first[1], first[0], True))
                continue
            if origin is None:
                sent_ts, count, first_receive = now, 0, 0
            else:
                sent_ts = now if origin[0] is None else origin[0]
                count, first_receive = origin[1], origin[2]
            items.append(
                (message_id, body, attrs, md5_body, md5_attrs, system, sent_ts, now + delay * 1000, count,
                 first_receive, group, dedup_id)
            )
            in_batch[message_id] = (seq, sent_ts)
            results.append((message_id, sent_ts, seq, False))
            seq += 1
        if items:
            self._commit((STORED, queue_id, now, self.next_seq, fifo, items))
        return results

    def receive(self, queue_id: str, max_messages: int, visibility_timeout: int, retention_seconds: int) -> list[tuple]:
        """Up to ``max_messages`` visible messages, now in flight (:meth:`poll` without its options)."""
        q = self.queues.get(queue_id)
        if q is None or not q.msgs:
            return []
        if q.fifo:
            return self.poll(queue_id, max_messages, visibility_timeout, retention_seconds).rows
        now = self.now_ms()
        q.release_due(now)
        self._expire(q, now, retention_seconds)
        picked, expired, _ = _pick(q, max_messages, now - retention_seconds * 1000, None)
        if expired:
            self._commit((EXPIRED, queue_id, expired))
        if not picked:
            return []
        self._commit((RECEIVED, queue_id, now, now + visibility_timeout * 1000, [m.seq for m in picked]))
        return _rows(q, picked)

    def poll(
        self,
        queue_id: str,
        max_messages: int,
        visibility_timeout: int,
        retention_seconds: int,
        *,
        attempt_id: str | None = None,
        redrive: Redrive | None = None,
        max_in_flight: int | None = None,
        short_poll: bool = True,
    ) -> Polled:
        """Receive up to ``max_messages`` visible messages, putting them in flight.

        FIFO queues: a repeated ``attempt_id`` within the attempt window returns the same messages and receipt
        handles when none of them was touched since, and puts them in flight anew.  ``redrive``: messages
        received ``max_receive_count`` times already go to the dead-letter queue instead.  ``max_in_flight``:
        with that many messages in flight, a short poll raises OverLimit and a long poll gets nothing.
        """
        q = self.queues.get(queue_id)
        if q is None or not q.msgs:
            return Polled([], [])
        now = self.now_ms()
        q.release_due(now)
        self._expire(q, now, retention_seconds)
        if attempt_id is not None and isinstance(q, FifoQueue):
            replayed = q.replayable(attempt_id, now)
            if replayed is not None:
                self._commit((RENEWED, queue_id, attempt_id, now + visibility_timeout * 1000))
                return Polled(_rows(q, replayed), [])
        n = max_messages
        if max_in_flight is not None:
            room = max_in_flight - q.counts[IN_FLIGHT]
            if room <= 0:
                if short_poll:
                    raise OverLimit(OVER_LIMIT_MESSAGE)
                return Polled([], [])
            n = min(n, room)
        cutoff = now - retention_seconds * 1000
        limit = redrive.max_receive_count if redrive is not None else None
        if isinstance(q, FifoQueue):
            picked, expired, dead = _pick_fifo(q, n, cutoff, limit, remote=redrive is not None and not redrive.local)
        else:
            picked, expired, dead = _pick(q, n, cutoff, limit)
        if expired:
            self._commit((EXPIRED, queue_id, expired))
        forward: list[Outgoing] = []
        if dead:
            assert redrive is not None
            forward = self._dead_letter(q, now, dead, redrive)
        if not picked:
            return Polled([], forward)
        deadline = now + visibility_timeout * 1000
        seqs = [m.seq for m in picked]
        if attempt_id is not None and q.fifo:
            self._commit((RECEIVED, queue_id, now, deadline, seqs, attempt_id))
        else:
            self._commit((RECEIVED, queue_id, now, deadline, seqs))
        return Polled(_rows(q, picked), forward)

    def _dead_letter(self, q: QueueState, now: int, dead: list[Message], redrive: Redrive) -> list[Outgoing]:
        copies = [_for_dead_letter_queue(m, redrive) for m in dead]
        if redrive.local:
            items = [_stored_item(c, now) for c in copies]
            self._commit(
                (
                    BATCH,
                    [
                        (STORED, redrive.dlq_queue_id, now, self.next_seq, redrive.dlq_fifo, items),
                        (DELETED, q.queue_id, [m.seq for m in dead]),
                    ],
                )
            )
            return []
        self.hold(q.queue_id, [m.seq for m in dead], self.transfer_hold_seconds)
        return copies

    def hold(self, queue_id: str, seqs: Sequence[int], seconds: int) -> None:
        """Keep these messages invisible for ``seconds`` while they are handed to another worker."""
        q = self.queues.get(queue_id)
        if q is None:
            return
        deadline = self.now_ms() + seconds * 1000
        changes = [(seq, deadline) for seq in seqs if seq in q.msgs]
        if changes:
            self._commit((VISIBILITY, queue_id, changes))

    def handed_over(self, queue_id: str, seqs: Sequence[int]) -> None:
        """Messages another worker's dead-letter queue has acknowledged leave this queue."""
        q = self.queues.get(queue_id)
        if q is None:
            return
        gone = [seq for seq in seqs if seq in q.msgs]
        if gone:
            self._commit((DELETED, queue_id, gone))

    def delete(self, queue_id: str, handles: Sequence[Any]) -> list[BatchResult]:
        """Delete the messages the handles name; a well-formed handle of a gone message succeeds too.

        On FIFO queues a handle whose message is no longer in flight under that receive has expired.
        """
        q = self.queues.get(queue_id)
        qtag = q.tag if q is not None else receipts.tag(queue_id)
        fifo = q is not None and q.fifo
        if fifo:
            assert q is not None
            q.release_due(self.now_ms())
        results: list[BatchResult] = []
        seqs: list[int] = []
        for handle in handles:
            receipt = receipts.decode(handle)
            if receipt is None or receipt.queue_tag != qtag:
                results.append(_invalid_handle(handle))
                continue
            m = q.msgs.get(receipt.seq) if q is not None else None
            if m is not None and receipts.tag(m.id) == receipt.id_tag:
                if fifo and (m.state != IN_FLIGHT or m.receive_count != receipt.receive_no):
                    results.append(_expired_handle(handle))
                    continue
                seqs.append(receipt.seq)
            results.append(None)
        if seqs:
            self._commit((DELETED, queue_id, seqs))
        return results

    def change_visibility(self, queue_id: str, entries: Sequence[Sequence[Any]]) -> list[BatchResult]:
        """Set new invisibility deadlines, ``timeout`` seconds from now, for in-flight messages."""
        q = self.queues.get(queue_id)
        qtag = q.tag if q is not None else receipts.tag(queue_id)
        now = self.now_ms()
        fifo = q is not None and q.fifo
        if q is not None:
            q.release_due(now)
        results: list[BatchResult] = []
        changes: list[tuple[int, int]] = []
        for handle, timeout in entries:
            receipt = receipts.decode(handle)
            if receipt is None or receipt.queue_tag != qtag:
                results.append(_invalid_handle(handle))
                continue
            m = q.msgs.get(receipt.seq) if q is not None else None
            if m is None or receipts.tag(m.id) != receipt.id_tag:
                results.append(_gone_handle(handle))
            elif fifo and m.receive_count != receipt.receive_no:
                results.append(_expired_handle(handle))
            elif m.state != IN_FLIGHT:
                results.append(_NOT_INFLIGHT)
            else:
                results.append(None)
                changes.append((receipt.seq, now + int(timeout) * 1000))
        if changes:
            self._commit((VISIBILITY, queue_id, changes))
        return results

    def purge(self, queue_id: str) -> None:
        q = self.queues.get(queue_id)
        if q is not None and q.msgs:
            self._commit((PURGED, queue_id))

    def drop_queue(self, queue_id: str) -> None:
        if queue_id in self.queues:
            self._commit((DROPPED, queue_id))

    def stats(self, queue_id: str, retention_seconds: int) -> tuple[int, int, int]:
        """``(visible, in_flight, delayed)``, expired messages left out."""
        q = self.queues.get(queue_id)
        if q is None:
            return (0, 0, 0)
        now = self.now_ms()
        q.release_due(now)
        self._expire(q, now, retention_seconds)
        ready, delayed, in_flight = q.counts
        return (ready, in_flight, delayed)

    def next_change(self, queue_id: str, max_in_flight: int | None = None) -> float | None:
        """Wall-clock seconds by which a receive on the queue may find something (now, if one would), or None."""
        q = self.queues.get(queue_id)
        if q is None or not q.msgs:
            return None
        now = self.now_ms()
        q.release_due(now)
        over = max_in_flight is not None and q.counts[IN_FLIGHT] >= max_in_flight
        if not over and q.has_visible():
            return now / 1000.0
        return q.timers[0][0] / 1000.0 if q.timers else None

    def _expire(self, q: QueueState, now: int, retention_seconds: int) -> None:
        order, msgs = q.order, q.msgs
        cutoff = now - retention_seconds * 1000
        expired: list[int] = []
        while order:
            m = msgs.get(order[0])
            if m is not None:
                if m.sent_ts > cutoff:
                    break
                expired.append(m.seq)
            order.popleft()
        if expired:
            self._commit((EXPIRED, q.queue_id, expired))

    # --- message move tasks --------------------------------------------------------------------------

    def start_move_task(self, queue_id: str, task: Mapping[str, Any]) -> dict[str, Any]:
        """Start moving the messages now in the queue; returns the task as :meth:`list_move_tasks` shows it.

        Starting a task whose handle the queue already has returns that task (a retried start).
        """
        handle = str(task["task_handle"])
        q = self.queues.get(queue_id)
        if q is not None:
            for existing in q.tasks:
                if existing.handle == handle:
                    return existing.listing()
            if any(t.status in ACTIVE for t in q.tasks):
                raise InvalidParameterValue(_ACTIVE_TASK)
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
                self.next_seq,
                len(q.msgs) if q is not None else 0,
            )
        )
        found = self.move_task(queue_id, handle)
        assert found is not None
        return found.listing()

    def list_move_tasks(self, queue_id: str) -> list[dict[str, Any]]:
        """The queue's last tasks, most recent first."""
        q = self.queues.get(queue_id)
        if q is None:
            return []
        return [t.listing() for t in reversed(q.tasks[-KEPT_TASKS:])]

    def cancel_move_task(self, queue_id: str, handle: str) -> int:
        """Ask a running task to stop; returns how many messages it has moved so far."""
        task = self.move_task(queue_id, handle)
        if task is None or task.status != RUNNING:
            raise ResourceNotFound("Task does not exist.")
        self._commit((TASK_STATUS, queue_id, handle, CANCELLING, None))
        return task.moved

    def move_task(self, queue_id: str, handle: str) -> MoveTask | None:
        q = self.queues.get(queue_id)
        if q is None:
            return None
        for task in q.tasks:
            if task.handle == handle:
                return task
        return None

    def active_move_tasks(self) -> list[tuple[str, str]]:
        """``(queue_id, handle)`` of every task RUNNING or CANCELLING (what a restarted worker resumes)."""
        return [(qid, t.handle) for qid, q in self.queues.items() for t in q.tasks if t.status in ACTIVE]

    def _pending(self, q: QueueState, task: MoveTask) -> deque[int]:
        pending = task.pending
        if pending is None:
            pending = task.pending = deque(seq for seq in q.msgs if seq < task.limit_seq)
        msgs = q.msgs
        while pending and pending[0] not in msgs:
            pending.popleft()
        return pending

    def move_candidates(self, queue_id: str, handle: str, n: int) -> list[Outgoing]:
        """Up to ``n`` of the task's messages that are visible now, oldest first, as they are in this queue.

        Messages in flight (a consumer has them) wait; in a FIFO queue so do the later messages of their group.
        """
        q = self.queues.get(queue_id)
        task = self.move_task(queue_id, handle)
        if q is None or task is None:
            return []
        q.release_due(self.now_ms())
        msgs = q.msgs
        out: list[Outgoing] = []
        blocked: set[str] = set()
        for seq in self._pending(q, task):
            m = msgs.get(seq)
            if m is None:
                continue
            if isinstance(q, FifoQueue):
                name = m.group or ""
                if name in blocked:
                    continue
                if m.state != READY or q.groups[name].inflight:
                    blocked.add(name)
                    continue
            elif m.state != READY:
                continue
            out.append(_outgoing(m))
            if len(out) >= n:
                break
        return out

    def move_remaining(self, queue_id: str, handle: str) -> int:
        """How many of the task's messages are still in the queue."""
        q = self.queues.get(queue_id)
        task = self.move_task(queue_id, handle)
        if q is None or task is None:
            return 0
        msgs = q.msgs
        return sum(1 for seq in self._pending(q, task) if seq in msgs)

    def move_locally(
        self, queue_id: str, handle: str, seqs: Sequence[int], dest_queue_id: str, dest_fifo: bool
    ) -> None:
        """Move these messages of the task to a queue of this partition, in one record."""
        q = self.queues.get(queue_id)
        if q is None:
            return
        now = self.now_ms()
        copies = [moved_copy(_outgoing(m), handle) for seq in seqs if (m := q.msgs.get(seq)) is not None]
        if not copies:
            return
        dest = self.queues.get(dest_queue_id)
        recent = dest.recent if dest is not None else {}
        cutoff = now - RESEND_WINDOW_MS
        items = [_stored_item(c, now) for c in copies if not (c.id in recent and recent[c.id][2] > cutoff)]
        records: list[Record] = []
        if items:
            records.append((STORED, dest_queue_id, now, self.next_seq, dest_fifo, items))
        records.append((TASK_MOVED, queue_id, handle, [c.seq for c in copies]))
        self._commit((BATCH, records))

    def moved(self, queue_id: str, handle: str, seqs: Sequence[int]) -> None:
        """Messages of the task another worker acknowledged leave this queue."""
        if seqs:
            self._commit((TASK_MOVED, queue_id, handle, list(seqs)))

    def end_move_task(self, queue_id: str, handle: str, status: str, failure_reason: str | None = None) -> None:
        if self.move_task(queue_id, handle) is not None:
            self._commit((TASK_STATUS, queue_id, handle, status, failure_reason))

    # --- records -----------------------------------------------------------------------------------

    def apply(self, record: Record) -> None:
        kind = record[0]
        if kind == SENT:
            self._apply_sent(record)
        elif kind == RECEIVED:
            self._apply_received(record)
        elif kind in (DELETED, EXPIRED):
            q = self.queues.get(record[1])
            if q is not None:
                self.live_bytes -= q.remove(record[2])
                q.tidy()
        elif kind == VISIBILITY:
            self._apply_visibility(record)
        elif kind == STORED:
            self._apply_stored(record)
        elif kind == BATCH:
            for inner in record[1]:
                self.apply(inner)
        elif kind == PURGED:
            q = self.queues.get(record[1])
            if q is not None:
                self.live_bytes -= q.live_bytes
                q.clear()
        elif kind == DROPPED:
            q = self.queues.pop(record[1], None)
            if q is not None:
                self.live_bytes -= q.live_bytes
        elif kind == RENEWED:
            self._apply_renewed(record)
        elif kind == RESTORED:
            self._apply_restored(record)
        elif kind == SEQUENCE:
            self.next_seq = max(self.next_seq, record[1])
        elif kind == QUEUE_META:
            _, queue_id, fifo, tasks = record
            self._queue(queue_id, fifo).tasks = [MoveTask.from_record(t) for t in tasks]
        elif kind == RESENDS:
            recent = self._queue(record[1]).recent
            for message_id, seq, sent_ts, ts in record[2]:
                recent[message_id] = (seq, sent_ts, ts)
        elif kind == ATTEMPTS:
            q = self.queues.get(record[1])
            if isinstance(q, FifoQueue):
                for attempt_id, ts, seqs in record[2]:
                    q.attempts[attempt_id] = Attempt(ts, list(seqs))
        elif kind in (TASK_STARTED, TASK_MOVED, TASK_STATUS):
            self._apply_task(record)
        else:
            raise ValueError(f"unknown record kind {kind!r}")

    def _queue(self, queue_id: str, fifo: bool = False) -> QueueState:
        q = self.queues.get(queue_id)
        if q is None:
            q = self.queues[queue_id] = FifoQueue(queue_id) if fifo else QueueState(queue_id)
        elif fifo and not q.fifo and not q.msgs:
            # Known so far only through its move tasks or handed-over ids: it turns out to be a FIFO queue.
            fifo_q = FifoQueue(queue_id)
            fifo_q.recent, fifo_q.tasks = q.recent, q.tasks
            q = self.queues[queue_id] = fifo_q
        return q

    def _apply_sent(self, record: Record) -> None:
        _, queue_id, ts, seq, items = record
        q = self._queue(queue_id)
        before = q.live_bytes
        for message_id, body, attrs, md5_body, md5_attrs, delay, system in items:
            m = Message(seq, message_id, body, attrs, md5_body, md5_attrs, system, ts, ts + delay * 1000, 0, 0)
            q.add(m, DELAYED if delay > 0 else READY)
            seq += 1
        self.live_bytes += q.live_bytes - before
        if seq > self.next_seq:
            self.next_seq = seq

    def _apply_stored(self, record: Record) -> None:
        _, queue_id, ts, seq, fifo, items = record
        q = self._queue(queue_id, fifo)
        before = q.live_bytes
        recent = q.recent
        keep_group = q.fifo
        for item in items:
            message_id, visible_at = item[0], item[7]
            m = Message(seq, *item[:10], *(item[10:12] if keep_group else (None, None)))
            q.add(m, READY if visible_at <= ts else DELAYED)
            recent.pop(message_id, None)
            recent[message_id] = (seq, m.sent_ts, ts)
            seq += 1
        cutoff = ts - RESEND_WINDOW_MS
        while recent:
            oldest = next(iter(recent))
            if recent[oldest][2] > cutoff:
                break
            del recent[oldest]
        self.live_bytes += q.live_bytes - before
        if seq > self.next_seq:
            self.next_seq = seq

    def _apply_received(self, record: Record) -> None:
        queue_id, ts, deadline, seqs = record[1:5]
        q = self.queues.get(queue_id)
        if q is None:
            return
        msgs = q.msgs
        held: list[Message] = []
        for seq in seqs:
            m = msgs.get(seq)
            if m is not None:
                if m.receive_count == 0:
                    m.first_receive_ts = ts
                m.receive_count += 1
                q.hold(m, deadline, IN_FLIGHT)
                held.append(m)
        if isinstance(q, FifoQueue):
            q.note_received(ts, held, record[5] if len(record) > 5 else None)
        q.tidy()

    def _apply_visibility(self, record: Record) -> None:
        q = self.queues.get(record[1])
        if q is None:
            return
        msgs = q.msgs
        fifo_q = q if isinstance(q, FifoQueue) else None
        for seq, deadline in record[2]:
            m = msgs.get(seq)
            if m is not None:
                if fifo_q is not None and m.attempt is not None:
                    fifo_q.forget_attempt(m.attempt)
                q.hold(m, deadline, IN_FLIGHT)
        q.tidy()

    def _apply_renewed(self, record: Record) -> None:
        _, queue_id, attempt_id, deadline = record
        q = self.queues.get(queue_id)
        if not isinstance(q, FifoQueue):
            return
        attempt = q.attempts.get(attempt_id)
        if attempt is None:
            return
        for seq in attempt.seqs:
            m = q.msgs.get(seq)
            if m is not None and m.attempt == attempt_id:
                q.hold(m, deadline, IN_FLIGHT)
        q.tidy()

    def _apply_restored(self, record: Record) -> None:
        _, queue_id, items = record
        q = self._queue(queue_id, fifo=bool(items) and len(items[0]) > 11)
        before = q.live_bytes
        top = self.next_seq
        for item in items:
            m = Message(*item)
            # Indexed as invisible until visible_at; the first release_due sorts out which are visible now.
            q.add(m, IN_FLIGHT if m.receive_count > 0 else DELAYED)
            top = max(top, m.seq + 1)
        self.live_bytes += q.live_bytes - before
        self.next_seq = top

    def _apply_task(self, record: Record) -> None:
        kind, queue_id, handle = record[:3]
        if kind == TASK_STARTED:
            q = self._queue(queue_id)
            q.tasks.append(MoveTask(handle, *record[3:]))
            while len(q.tasks) > KEPT_TASKS and q.tasks[0].status not in ACTIVE:
                del q.tasks[0]
            return
        task = self.move_task(queue_id, handle)
        if task is None:
            return
        if kind == TASK_MOVED:
            seqs = record[3]
            task.moved += len(seqs)
            q = self.queues[queue_id]
            self.live_bytes -= q.remove(seqs)
            q.tidy()
        else:
            task.status, task.failure_reason = record[3], record[4]

    # --- snapshots ---------------------------------------------------------------------------------

    def snapshot(self) -> Iterator[Record]:
        """Records that rebuild the current state from nothing (what compaction writes)."""
        yield (SEQUENCE, self.next_seq)
        for queue_id, q in self.queues.items():
            if q.fifo or q.recent or q.tasks:
                yield (QUEUE_META, queue_id, q.fifo, [t.as_record() for t in q.tasks])
            yield from _chunks(RESENDS, queue_id, _resends(q), _META_CHUNK)
            yield from _chunks(ATTEMPTS, queue_id, _attempts(q), _META_CHUNK)
            yield from _chunks(RESTORED, queue_id, (m.as_restored() for m in q.msgs.values()), _SNAPSHOT_CHUNK)

    def state(self) -> dict[str, list[tuple]]:
        """Every live message's fields by queue, in send order: what must survive replay and compaction."""
        return {qid: [m.as_restored() for m in q.msgs.values()] for qid, q in self.queues.items() if q.msgs}

    def meta_state(self) -> dict[str, tuple]:
        """Per queue, what must survive besides messages: type, resend window, receive attempts, move tasks."""
        return {
            qid: (q.fifo, list(_resends(q)), list(_attempts(q)), [tuple(t.as_record()) for t in q.tasks])
            for qid, q in self.queues.items()
            if q.fifo or q.recent or q.tasks
        }


def _resends(q: QueueState) -> Iterator[tuple]:
    for message_id, (seq, sent_ts, ts) in q.recent.items():
        yield (message_id, seq, sent_ts, ts)


def _attempts(q: QueueState) -> Iterator[tuple]:
    if isinstance(q, FifoQueue):
        for attempt_id, attempt in q.attempts.items():
            yield (attempt_id, attempt.ts, list(attempt.seqs))


def _chunks(kind: int, queue_id: str, items: Iterable[Any], size: int) -> Iterator[Record]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield (kind, queue_id, chunk)
            chunk = []
    if chunk:
        yield (kind, queue_id, chunk)


def _pick(q: QueueState, n: int, cutoff: int, limit: int | None) -> tuple[list[Message], list[int], list[Message]]:
    """Standard queue: up to ``n`` visible messages oldest first, and those expired or due for the DLQ on the way."""
    picked: list[Message] = []
    expired: list[int] = []
    dead: list[Message] = []
    while len(picked) < n:
        m = q.pop_visible()
        if m is None:
            break
        if m.sent_ts <= cutoff:
            expired.append(m.seq)
        elif limit is not None and m.receive_count >= limit:
            dead.append(m)
            if len(dead) >= MAX_DEAD_LETTERS_PER_RECEIVE:
                break
        else:
            picked.append(m)
    return picked, expired, dead


def _pick_fifo(
    q: FifoQueue, n: int, cutoff: int, limit: int | None, *, remote: bool
) -> tuple[list[Message], list[int], list[Message]]:
    """FIFO queue: ready groups oldest first, as many visible messages of each as fit, in group order."""
    q.refresh()
    picked: list[Message] = []
    expired: list[int] = []
    dead: list[Message] = []
    taken: set[str] = set()
    while len(picked) < n and len(dead) < MAX_DEAD_LETTERS_PER_RECEIVE:
        g = q.pop_ready(taken)
        if g is None:
            break
        taken.add(g.name)
        for m in q.in_order(g):
            if m.state != READY:
                break
            if m.sent_ts <= cutoff:
                expired.append(m.seq)
                continue
            if limit is not None and m.receive_count >= limit:
                dead.append(m)
                # A message handed to another worker stays in flight until acknowledged: its group waits.
                if remote or len(dead) >= MAX_DEAD_LETTERS_PER_RECEIVE:
                    break
                continue
            picked.append(m)
            if len(picked) >= n:
                break
    return picked, expired, dead


def _rows(q: QueueState, messages: list[Message]) -> list[tuple]:
    qtag, encode, tag = q.tag, receipts.encode, receipts.tag
    rows = [
        (
            m.id,
            encode(qtag, m.seq, m.receive_count, tag(m.id)),
            m.body,
            m.attrs,
            m.md5_body,
            m.md5_attrs,
            m.system,
            m.sent_ts,
            m.first_receive_ts,
            m.receive_count,
        )
        for m in messages
    ]
    if not q.fifo:
        return rows
    return [(*row, f"{m.seq:020d}", m.group, m.dedup_id) for row, m in zip(rows, messages, strict=True)]


def _outgoing(m: Message) -> Outgoing:
    return Outgoing(
        m.seq,
        m.id,
        m.body,
        m.attrs,
        m.md5_body,
        m.md5_attrs,
        m.system,
        m.sent_ts,
        m.receive_count,
        m.first_receive_ts,
        m.group,
        m.dedup_id,
    )


def _for_dead_letter_queue(m: Message, redrive: Redrive) -> Outgoing:
    """``m`` as the dead-letter queue stores it.

    It keeps its id, body, attributes and receive count, and names its source queue.  A standard DLQ keeps
    the original enqueue time (retention counts from the first send); a FIFO DLQ resets it, and replaces the
    deduplication id with the message id, so two messages that shared a deduplication id both fit in.
    """
    system = {**m.system, DLQ_SOURCE_ARN: redrive.source_arn}
    if redrive.dlq_fifo:
        return _outgoing(m)._replace(system=system, sent_ts=None, group=m.group or m.id, dedup_id=m.id)
    return _outgoing(m)._replace(system=system, group=None, dedup_id=None)


def _stored_item(c: Outgoing, now: int) -> tuple:
    """A STORED record item for a message handed over at ``now``: visible at once."""
    return (
        c.id,
        c.body,
        c.attrs,
        c.md5_body,
        c.md5_attrs,
        c.system,
        now if c.sent_ts is None else c.sent_ts,
        now,
        c.receive_count,
        c.first_receive_ts,
        c.group,
        c.dedup_id,
    )


def _invalid_handle(handle: object) -> tuple[str, str]:
    return (ReceiptHandleIsInvalid.code, f'The input receipt handle "{handle}" is not a valid receipt handle.')


def _gone_handle(handle: object) -> tuple[str, str]:
    return (
        InvalidParameterValue.code,
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not "
        "available for visibility timeout change.",
    )


def _expired_handle(handle: object) -> tuple[str, str]:
    return (
        InvalidParameterValue.code,
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.",
    )
