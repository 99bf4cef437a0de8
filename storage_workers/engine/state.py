"""The message state of every queue of one partition, changed only by records: what recovery, followers and
compaction run.

:meth:`PartitionState.apply` takes a record (see :mod:`.records`) and changes the state as the record says,
using the record's own timestamps, never a clock: applying the same records always gives the same state, so
a follower fed the leader's records holds the leader's state, and a snapshot (:meth:`snapshot`) replayed into
a fresh state gives it back.  Nothing here decides anything or words an error; the request side
(:class:`~.engine.Engine`) reads this state, decides, and emits the records.

Standard queues are :class:`~.messages.QueueState`, FIFO queues :class:`~.fifo.FifoQueue`.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Container, Iterable, Iterator
from typing import Any, NamedTuple

from ferrymq.limits import DROPPED_QUEUE_MEMORY_SECONDS, RESEND_HORIZON_MS
from ferrymq.storage.engine.fifo import Attempt, FifoQueue
from ferrymq.storage.engine.messages import DELAYED, IN_FLIGHT, READY, STEP, QueueState
from ferrymq.storage.engine.records import (
    ATTEMPTS,
    BATCH,
    CREDITS,
    DELETED,
    DROPPED,
    EXPIRED,
    GONE,
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
from ferrymq.storage.engine.rings import Ring
from ferrymq.storage.engine.table import MessageTable
from ferrymq.storage.engine.tasks import ACTIVE, KEPT_TASKS, MoveTask

_SNAPSHOT_CHUNK = 256
_META_CHUNK = 4096


class Swept(NamedTuple):
    """What one :meth:`PartitionState.sweep` did."""

    forgotten: int
    """Queues forgotten, holding nothing."""
    more: bool
    """It stopped at a :data:`STEP` with more perhaps left: sweep again."""


class PartitionState:
    """Every queue of one partition, by queue id, and the sequence numbers used so far."""

    free_in_steps = False
    """Whether the rows of a purged or dropped queue are freed later, in steps (:meth:`free_unowned`), rather than
    as the record is applied.  A state a worker serves from sets it (a purge of a million messages held its loop
    0.4 s); replay and compaction, off the loop, free at once and hold no backlog."""

    def __init__(self) -> None:
        self.queues: dict[str, QueueState] = {}
        self.table = MessageTable()
        """Every message of every queue here (:mod:`.table`)."""
        self._numbers = 0
        self.next_seq = 1
        self.live_bytes = 0
        """Rough size of the live messages, to tell when the log is worth compacting."""
        self.dropped: dict[str, int] = {}
        """Queue id -> when it was dropped (ms), oldest first, for DROPPED_QUEUE_MEMORY_SECONDS: sends to it
        are refused meanwhile."""
        self.unowned: deque[tuple[int, Ring]] = deque()
        """``(queue number, send order)`` of purged or dropped queues whose rows are still to free, oldest first
        (with :attr:`free_in_steps`).  No queue reads them: a purged queue takes a new number."""

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("free_in_steps", None)  # the serving worker's choice, made again by the one that loads it
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("unowned", deque())  # a checkpoint written before the backlog existed
        # Names interned as pickle's own loading does, so that the state pickles again to the same bytes.
        self.__dict__.update((sys.intern(name), value) for name, value in state.items())

    @classmethod
    def replay(cls, records: Iterable[Record]) -> PartitionState:
        state = cls()
        apply = state.apply
        for record in records:
            apply(record)
        return state

    def move_task(self, queue_id: str, handle: str) -> MoveTask | None:
        q = self.queues.get(queue_id)
        if q is None:
            return None
        for task in q.tasks:
            if task.handle == handle:
                return task
        return None

    # --- records -----------------------------------------------------------------------------------

    def apply(self, record: Record) -> None:
        kind = record[0]
        if kind == SENT:
            self.apply_sent(record)
        elif kind == RECEIVED:
            self._apply_received(record)
        elif kind in (DELETED, EXPIRED):
            self.apply_removed(record)
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
                self._empty(q, purged=True)
        elif kind == DROPPED:
            q = self.queues.pop(record[1], None)
            if q is not None:
                self._empty(q, purged=False)
            if len(record) > 2:
                self.dropped.pop(record[1], None)
                self.dropped[record[1]] = record[2]
        elif kind == RENEWED:
            self._apply_renewed(record)
        elif kind == RESTORED:
            self._apply_restored(record)
        elif kind == SEQUENCE:
            self.next_seq = max(self.next_seq, record[1])
        elif kind == QUEUE_META:
            _, queue_id, fifo, tasks = record
            self.queue(queue_id, fifo).tasks = [MoveTask.from_record(t) for t in tasks]
        elif kind == RESENDS:
            recent = self.queue(record[1]).recent
            for message_id, seq, sent_ts, ts in record[2]:
                recent[message_id] = (seq, sent_ts, ts)
        elif kind == GONE:
            q = self.queue(record[1])
            q.last_sent_ts = max(q.last_sent_ts, record[2])
            for message_id, sent_ts in record[3]:
                q.gone[message_id] = sent_ts
        elif kind == ATTEMPTS:
            q = self.queues.get(record[1])
            if isinstance(q, FifoQueue):
                for attempt_id, ts, seqs in record[2]:
                    q.attempts[attempt_id] = Attempt(ts, list(seqs))
        elif kind in (TASK_STARTED, TASK_MOVED, TASK_STATUS):
            self._apply_task(record)
        elif kind == CREDITS:
            q = self.queues.get(record[1])
            if q is not None:
                q.credits = list(record[2]) or None
        else:
            raise ValueError(f"unknown record kind {kind!r}")

    def _empty(self, q: QueueState, *, purged: bool) -> None:
        """Forget every message of ``q``: at once, or with :attr:`free_in_steps` by handing its rows to
        :attr:`unowned` (a purged queue goes on under a new number, so that none of them is its any more)."""
        self.live_bytes -= q.live_bytes
        if not self.free_in_steps or len(q.order) <= STEP:
            q.clear()
            return
        self.unowned.append((q.number, q.order))
        q.clear(self._number() if purged else None, free=False)

    def free_unowned(self, budget: int = STEP) -> bool:
        """Free up to ``budget`` rows of purged and dropped queues (:attr:`unowned`); returns whether some are
        left."""
        unowned, table = self.unowned, self.table
        owner, slot_of, free = table.owner, table.slot, table.free
        while unowned and budget > 0:
            number, seqs = unowned[0]
            while seqs and budget > 0:
                budget -= 1
                seq = seqs.popleft()
                slot = slot_of(seq)
                if slot >= 0 and owner[slot] == number:
                    free(seq, slot)
            if not seqs:
                unowned.popleft()
        table.tidy()
        return bool(unowned)

    def _number(self) -> int:
        self._numbers += 1
        return self._numbers

    def queue(self, queue_id: str, fifo: bool = False) -> QueueState:
        q = self.queues.get(queue_id)
        if q is None:
            kind = FifoQueue if fifo else QueueState
            q = self.queues[queue_id] = kind(queue_id, self.table, self._number())
        elif fifo and not q.fifo and not q.msgs:
            # Known so far only through its move tasks or handed-over ids: it turns out to be a FIFO queue.
            fifo_q = FifoQueue(queue_id, self.table, self._number())
            fifo_q.recent, fifo_q.tasks = q.recent, q.tasks
            q = self.queues[queue_id] = fifo_q
        return q

    def apply_sent(
        self, record: Record, removed: Container[int] | None = None, unstored: dict[int, tuple[Any, int]] | None = None
    ) -> None:
        """``removed``: messages to leave out, each noted in ``unstored`` instead (compaction's fold, :mod:`.fold`)."""
        _, queue_id, ts, seq, items = record
        q = self.queue(queue_id)
        # The queue's timeline never goes back, even when a new leader's clock is behind the last one's.
        q.last_sent_ts = max(q.last_sent_ts, ts)
        before = q.live_bytes
        add = q.add
        for message_id, body, attrs, md5_body, md5_attrs, delay, system in items:
            if removed is not None and seq in removed:
                unstored[seq] = (message_id, ts)  # type: ignore[index]
            else:
                add(seq, DELAYED if delay > 0 else READY, message_id, body, attrs, md5_body, md5_attrs, system, ts,
                    ts + delay * 1000, 0, 0)
            seq += 1
        self.live_bytes += q.live_bytes - before
        if seq > self.next_seq:
            self.next_seq = seq

    def apply_removed(self, record: Record, unstored: dict[int, tuple[Any, int]] | None = None) -> None:
        """A DELETED or EXPIRED record.  ``unstored``: messages compaction's fold left out of a standard queue
        (:mod:`.fold`), removed as if they were in (``QueueState.remove``)."""
        q = self.queues.get(record[1])
        if q is not None:
            self.live_bytes -= q.remove(record[2]) if unstored is None else q.remove(record[2], unstored)
            q.tidy()

    def _apply_stored(self, record: Record) -> None:
        _, queue_id, ts, seq, fifo, items = record
        q = self.queue(queue_id, fifo)
        before = q.live_bytes
        recent = q.recent
        keep_group = q.fifo
        for item in items:
            message_id, sent_ts, visible_at = item[0], item[6], item[7]
            q.add(seq, READY if visible_at <= ts else DELAYED, *item[:10],
                  *(item[10:12] if keep_group else (None, None)))
            recent.pop(message_id, None)
            recent[message_id] = (seq, sent_ts, ts)
            seq += 1
        q.forget_resends(ts)
        self.live_bytes += q.live_bytes - before
        if seq > self.next_seq:
            self.next_seq = seq

    def _apply_received(self, record: Record) -> None:
        queue_id, ts, deadline, seqs = record[1:5]
        q = self.queues.get(queue_id)
        if q is None:
            return
        slot_of, table = q.msgs.slot, self.table
        receives = table.receives
        held: list[int] = []
        for seq in seqs:
            slot = slot_of(seq)
            if slot >= 0:
                if receives[slot] == 0:
                    table.first_receive[slot] = ts
                receives[slot] += 1
                q.hold_slot(seq, slot, deadline, IN_FLIGHT)
                held.append(seq)
        if isinstance(q, FifoQueue):
            q.note_received(ts, held, record[5] if len(record) > 5 else None)
        q.tidy()

    def _apply_visibility(self, record: Record) -> None:
        q = self.queues.get(record[1])
        if q is None:
            return
        slot_of = q.msgs.slot
        fifo_q = q if isinstance(q, FifoQueue) else None
        for seq, deadline in record[2]:
            slot = slot_of(seq)
            if slot >= 0:
                if fifo_q is not None:
                    attempt = fifo_q.attempt_of.get(seq)
                    if attempt is not None:
                        fifo_q.forget_attempt(attempt)
                q.hold_slot(seq, slot, deadline, IN_FLIGHT)
        q.tidy()

    def _apply_renewed(self, record: Record) -> None:
        _, queue_id, attempt_id, deadline = record
        q = self.queues.get(queue_id)
        if not isinstance(q, FifoQueue):
            return
        attempt = q.attempts.get(attempt_id)
        if attempt is None:
            return
        slot_of = q.msgs.slot
        for seq in attempt.seqs:
            slot = slot_of(seq)
            if slot >= 0 and q.attempt_of.get(seq) == attempt_id:
                q.hold_slot(seq, slot, deadline, IN_FLIGHT)
        q.tidy()

    def _apply_restored(self, record: Record) -> None:
        _, queue_id, items = record
        q = self.queue(queue_id, fifo=bool(items) and len(items[0]) > 11)
        before = q.live_bytes
        top = self.next_seq
        for item in items:
            # A message never received and never delayed (visible from when it was sent) is visible now, whenever
            # now is. Any other is indexed as invisible until its visible_at, and the first release_due sorts out
            # which are visible now. Indexing every message so made a base of 100,000 messages 100,000 timers,
            # which a follower never releases and kept through its checkpoints: the first request on it as leader
            # popped them all (88 ms).
            sent_ts, visible_at, receives = item[7:10]
            q.add(item[0], IN_FLIGHT if receives > 0 else DELAYED if visible_at > sent_ts else READY, *item[1:])
            top = max(top, item[0] + 1)
        self.live_bytes += q.live_bytes - before
        self.next_seq = top

    def _apply_task(self, record: Record) -> None:
        kind, queue_id, handle = record[:3]
        if kind == TASK_STARTED:
            q = self.queue(queue_id)
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

    # --- bounded memory ------------------------------------------------------------------------------

    def sweep(self, now: int) -> Swept:
        """Forget resend ids and receive attempts past their windows as of ``now`` (ms), and queues left
        holding nothing; a queue's windows are forgotten a :data:`STEP` at a time, so that a sweep stopped there
        says so (``Swept.more``) and is called again.

        This is not a record, and need not be one: what it forgets is already dead (no store finds an id past
        the resend window, no retry replays an attempt past its window, an idle queue answers as an unknown
        one does), so a replay that never swept behaves the same.  Each queue costs O(1) plus what it forgets,
        since both windows are kept oldest first.
        """
        idle: list[str] = []
        more = False
        for queue_id, q in self.queues.items():
            if q.recent and q.forget_resends(now):
                more = True
            # Removals age on the queue's record timeline (``QueueState._remember_gone``); this only frees
            # queues nobody sends to any more, so it waits a second horizon in case this worker's clock runs
            # ahead of the one that stamped them.
            if q.gone and q.forget_gone(now - 2 * RESEND_HORIZON_MS):
                more = True
            if isinstance(q, FifoQueue) and q.attempts and q.sweep_attempts(now):
                more = True
            if q.is_idle():
                idle.append(queue_id)
        for queue_id in idle:
            del self.queues[queue_id]
        dropped, cutoff = self.dropped, now - DROPPED_QUEUE_MEMORY_SECONDS * 1000
        while dropped:
            oldest = next(iter(dropped))
            if dropped[oldest] > cutoff:
                break
            del dropped[oldest]
        return Swept(len(idle), more)

    # --- snapshots ---------------------------------------------------------------------------------

    def snapshot(self) -> Iterator[Record]:
        """Records that rebuild the current state from nothing (what compaction writes)."""
        yield (SEQUENCE, self.next_seq)
        for queue_id, ts in self.dropped.items():
            yield (DROPPED, queue_id, ts)
        for queue_id, q in self.queues.items():
            if q.fifo or q.recent or q.tasks:
                yield (QUEUE_META, queue_id, q.fifo, [t.as_record() for t in q.tasks])
            yield from _chunks(RESENDS, queue_id, _resends(q), _META_CHUNK)
            if q.last_sent_ts:
                for _, _, chunk in _chunks(GONE, queue_id, q.gone.items(), _META_CHUNK, always=True):
                    yield (GONE, queue_id, q.last_sent_ts, chunk)
            yield from _chunks(ATTEMPTS, queue_id, _attempts(q), _META_CHUNK)
            yield from _chunks(RESTORED, queue_id, (m.as_restored() for m in q.msgs.values()), _SNAPSHOT_CHUNK)
            if q.credits is not None:
                yield (CREDITS, queue_id, list(q.credits))

    def state(self) -> dict[str, list[tuple]]:
        """Every live message's fields by queue, in send order: what must survive replay and compaction."""
        return {qid: [m.as_restored() for m in q.msgs.values()] for qid, q in self.queues.items() if q.msgs}

    def credits_state(self) -> dict[str, list[int]]:
        """The priority scheduler's credits of each queue that has any: what a failover must keep to pick on
        as the leader would."""
        return {qid: list(q.credits) for qid, q in self.queues.items() if q.credits is not None}

    def meta_state(self) -> dict[str, tuple]:
        """Per queue, what must survive besides messages: type, resend window, removed ids, receive attempts,
        move tasks."""
        return {
            qid: (
                q.fifo,
                list(_resends(q)),
                list(q.gone.items()),
                list(_attempts(q)),
                [tuple(t.as_record()) for t in q.tasks],
            )
            for qid, q in self.queues.items()
            if q.fifo or q.recent or q.gone or q.tasks
        }


def _resends(q: QueueState) -> Iterator[tuple]:
    for message_id, (seq, sent_ts, ts) in q.recent.items():
        yield (message_id, seq, sent_ts, ts)


def _attempts(q: QueueState) -> Iterator[tuple]:
    if isinstance(q, FifoQueue):
        for attempt_id, attempt in q.attempts.items():
            yield (attempt_id, attempt.ts, list(attempt.seqs))


def _chunks(kind: int, queue_id: str, items: Iterable[Any], size: int, *, always: bool = False) -> Iterator[Record]:
    """``(kind, queue_id, chunk)`` records of at most ``size`` items; ``always``: one, empty, when there are
    none."""
    chunk: list[Any] = []
    sent = False
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield (kind, queue_id, chunk)
            sent = True
            chunk = []
    if chunk or (always and not sent):
        yield (kind, queue_id, chunk)
