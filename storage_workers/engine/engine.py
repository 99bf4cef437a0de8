"""The queue engine's request side: read the partition state, decide, emit records.

Every request (``send``, ``store``, ``poll``, ``delete``, ...) turns what it changes into records (see
:mod:`.records`) and commits each one: :meth:`~.state.PartitionState.apply` first, then ``on_record`` (the
log).  Recovery, followers and compaction apply the same records to a :class:`~.state.PartitionState` of their
own and reach the same state.  Time comes from an injected :class:`~ferrymq.clock.Clock`; records carry their
timestamps.  Move task requests live in :mod:`.move_task_requests`, the shaping of received rows in
:mod:`.rows`, the wording of refusals in :mod:`.answers`, the order of receives over priority levels in
:mod:`.priorities`.

Receipt handles are authenticated with the partition's secret (``receipt_key``, see :mod:`.receipts`):
only this partition's engines, leader or a follower taking over, accept what it hands out.

What the engine cannot do itself it hands back to the worker: messages to dead-letter into a queue that
another worker leads (``Polled.dead_letters``, held in flight meanwhile), and the messages a move task is to
hand over.  Handing a message over is idempotent by message id: a queue remembers the ids it stored through
:meth:`Engine.store` for ``ferrymq.limits.RESEND_WINDOW_MS`` and answers a resend with the original's result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from ferrymq.clock import Clock
from ferrymq.errors import OverLimit, QueueDoesNotExist
from ferrymq.limits import MAX_RETENTION_SECONDS
from ferrymq.storage.engine.answers import (
    OVER_LIMIT_MESSAGE,
    BatchResult,
    expired_handle,
    gone_handle,
    invalid_handle,
)
from ferrymq.storage.engine.fifo import FifoQueue
from ferrymq.storage.engine.messages import IN_FLIGHT, READY, STEP, Message, QueueState, timer_due
from ferrymq.storage.engine.move_task_requests import MoveTaskRequests
from ferrymq.storage.engine.peek import peek_rows
from ferrymq.storage.engine.priorities import PriorityPicker
from ferrymq.storage.engine.receipts import KeyNotRead, Receipt, Receipts
from ferrymq.storage.engine.records import (
    BATCH,
    CREDITS,
    DELETED,
    DROPPED,
    EXPIRED,
    PURGED,
    RECEIVED,
    RENEWED,
    SENT,
    STORED,
    VISIBILITY,
    Record,
)
from ferrymq.storage.engine.rows import (
    FIFO_RECEIVED_FIELDS,
    RECEIVED_FIELDS,
    for_dead_letter_queue,
    received_rows,
    stored_item,
)
from ferrymq.storage.engine.state import PartitionState, Swept
from ferrymq.storage.engine.tasks import Outgoing

__all__ = [
    "FIFO_RECEIVED_FIELDS",
    "OVER_LIMIT_MESSAGE",
    "RECEIVED_FIELDS",
    "TRANSFER_HOLD_SECONDS",
    "BatchResult",
    "Engine",
    "Polled",
    "Redrive",
]

TRANSFER_HOLD_SECONDS = 10
"""How long a message being handed to another worker stays invisible, by default; if the hand-over does not
finish (the other worker is down, or this one crashed), the message becomes visible again and the next
receive or mover tries once more."""

MAX_DEAD_LETTERS_PER_RECEIVE = 100


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


class Engine(MoveTaskRequests):
    """The requests on every queue of one partition."""

    def __init__(
        self,
        clock: Clock,
        receipt_key: bytes | None,
        on_record: Callable[[Record], None] | None = None,
        *,
        partition: PartitionState | None = None,
    ) -> None:
        """``receipt_key``: the partition's secret, 16 to 64 bytes (None: not read yet, given with
        :meth:`use_receipt_key` before anything is received); ``partition``: a state to go on from (a follower's,
        when it takes over), else an empty one."""
        self.clock = clock
        self.receipts: Receipts = KeyNotRead() if receipt_key is None else Receipts(receipt_key)
        self.on_record = on_record
        self.partition = partition if partition is not None else PartitionState()
        self.transfer_hold_seconds = TRANSFER_HOLD_SECONDS

    def use_receipt_key(self, receipt_key: bytes) -> None:
        self.receipts = Receipts(receipt_key)

    @classmethod
    def replay(cls, clock: Clock, records: Iterable[Record], *, receipt_key: bytes) -> Engine:
        return cls(clock, receipt_key, partition=PartitionState.replay(records))

    # --- the partition state, as the worker and compaction read it ------------------------------------

    @property
    def queues(self) -> dict[str, QueueState]:
        return self.partition.queues

    @property
    def next_seq(self) -> int:
        return self.partition.next_seq

    @property
    def live_bytes(self) -> int:
        return self.partition.live_bytes

    def apply(self, record: Record) -> None:
        self.partition.apply(record)

    def snapshot(self) -> Iterator[Record]:
        return self.partition.snapshot()

    def state(self) -> dict[str, list[tuple]]:
        return self.partition.state()

    def meta_state(self) -> dict[str, tuple]:
        return self.partition.meta_state()

    def sweep(self) -> Swept:
        """Expire messages whose retention ended in queues nobody asked for since, then forget what has
        outlived its window (see :meth:`PartitionState.sweep`).  The worker calls this now and then, and again
        at once (after letting others run) while the answer says it stopped at a step with more left.

        A queue's retention is the one its last request named; before any request (just after a restart) it
        is SQS's longest, which no queue's messages outlive.
        """
        now = self.now_ms()
        more = False
        for q in list(self.partition.queues.values()):
            if q.order and self._expire(q, now, q.retention_seconds or MAX_RETENTION_SECONDS, sweeping=True):
                more = True
        swept = self.partition.sweep(now)
        return swept._replace(more=True) if more else swept

    # --- requests: read, decide, record ------------------------------------------------------------

    def now_ms(self) -> int:
        return int(self.clock.now() * 1000)

    def _commit(self, record: Record) -> None:
        self.partition.apply(record)
        if self.on_record is not None:
            self.on_record(record)

    def is_fifo(self, queue_id: str) -> bool:
        q = self.partition.queues.get(queue_id)
        return q is not None and q.fifo

    def send(
        self,
        queue_id: str,
        messages: Sequence[Sequence[Any]],
        retention_seconds: int,
        *,
        resend: bool = False,
    ) -> int:
        """Store messages of a standard queue given as ``(id, body, attrs, md5_body, md5_attrs, delay, system)``;
        returns their sent_ts.

        ``resend`` marks a resend of a send whose outcome the caller does not know (its leader stepped down,
        or timed out), with the first attempt's message ids: an id a plain send stored within the resend
        horizon, held still or already deleted by a consumer (:meth:`QueueState.sent_recently`), was stored by
        the first attempt and is not stored again.  Only ids are compared, never the caller's clock with
        this worker's.
        """
        now = self.now_ms()
        if resend and messages:
            q = self.partition.queues.get(queue_id)
            if q is not None:
                stored = q.sent_recently({m[0] for m in messages})
                messages = [m for m in messages if m[0] not in stored]
        if not messages:
            return now
        self._before_store(queue_id, now, retention_seconds)
        self._commit((SENT, queue_id, now, self.partition.next_seq, messages))
        self.partition.queues[queue_id].retention_seconds = retention_seconds
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
        q = self._before_store(queue_id, now, retention_seconds)
        seq = self.partition.next_seq
        items: list[tuple] = []
        results: list[tuple[str, int, int, bool]] = []
        in_batch: dict[str, tuple[int, int]] = {}
        for message_id, body, attrs, md5_body, md5_attrs, delay, system, group, dedup_id, origin in messages:
            known = q.resend_of(message_id, now) if q is not None else None
            if known is not None:
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
            self._commit((STORED, queue_id, now, self.partition.next_seq, fifo, items))
        return results

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
        priority_levels: int = 1,
    ) -> Polled:
        """Receive up to ``max_messages`` visible messages, putting them in flight.

        FIFO queues: a repeated ``attempt_id`` within the attempt window returns the same messages and receipt
        handles when none of them was touched since, and puts them in flight anew.  ``redrive``: messages
        received ``max_receive_count`` times already go to the dead-letter queue instead.  ``max_in_flight``:
        with that many messages in flight, a short poll raises OverLimit and a long poll gets nothing.
        ``priority_levels``: the queue's ``FerryMQPriorityLevels``; visible messages above level 0 are served by
        weighted round robin over that many levels (:mod:`.priorities`).
        """
        q = self.partition.queues.get(queue_id)
        if q is None or not q.msgs:
            return Polled([], [])
        now = self.now_ms()
        q.release_due(now)
        self._expire(q, now, retention_seconds)
        if attempt_id is not None and isinstance(q, FifoQueue):
            replayed = q.replayable(attempt_id, now)
            if replayed is not None:
                self._commit((RENEWED, queue_id, attempt_id, now + visibility_timeout * 1000))
                return Polled(self._rows(q, replayed), [])
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
        elif q.tiers is None and q.credits is None:
            # Credits without tiers: a state restored from a snapshot, whose higher levels are not visible yet;
            # the picker still zeroes their credits, as the engine that wrote the snapshot does.
            picked, expired, dead = _pick(q.pop_visible, n, cutoff, limit)
        else:
            picker = PriorityPicker(q, priority_levels)
            picked, expired, dead = _pick(picker.pop, n, cutoff, limit)
            credits = picker.recorded_credits()
            if credits != q.credits:
                self._commit((CREDITS, queue_id, credits or []))
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
        return Polled(self._rows(q, picked), forward)

    def _rows(self, q: QueueState, messages: list[Message]) -> list[tuple]:
        return received_rows(self.receipts, self.receipts.queue_tag(q.queue_id), q.fifo, messages)

    def _dead_letter(self, q: QueueState, now: int, dead: list[Message], redrive: Redrive) -> list[Outgoing]:
        copies = [for_dead_letter_queue(m, redrive.source_arn, redrive.dlq_fifo) for m in dead]
        if redrive.local:
            items = [stored_item(c, now) for c in copies]
            stored = (STORED, redrive.dlq_queue_id, now, self.partition.next_seq, redrive.dlq_fifo, items)
            self._commit((BATCH, [stored, (DELETED, q.queue_id, [m.seq for m in dead])]))
            return []
        self.hold(q.queue_id, [m.seq for m in dead], self.transfer_hold_seconds)
        return copies

    def hold(self, queue_id: str, seqs: Sequence[int], seconds: int) -> None:
        """Keep these messages invisible for ``seconds`` while they are handed to another worker."""
        q = self.partition.queues.get(queue_id)
        if q is None:
            return
        deadline = self.now_ms() + seconds * 1000
        changes = [(seq, deadline) for seq in seqs if seq in q.msgs]
        if changes:
            self._commit((VISIBILITY, queue_id, changes))

    def handed_over(self, queue_id: str, seqs: Sequence[int]) -> None:
        """Messages another worker's dead-letter queue has acknowledged leave this queue."""
        q = self.partition.queues.get(queue_id)
        if q is None:
            return
        gone = [seq for seq in seqs if seq in q.msgs]
        if gone:
            self._commit((DELETED, queue_id, gone))

    def _receipt_of(
        self, q: QueueState | None, queue_tag: bytes, handle: object
    ) -> tuple[Receipt | None, Message | None]:
        """The receipt a handle of queue ``q`` stands for (None: not a valid handle of this queue), and the
        message it names if that is still there."""
        receipts = self.receipts
        receipt = receipts.decode(handle)
        if receipt is None or receipt.queue_tag != queue_tag:
            return None, None
        m = q.msgs.get(receipt.seq) if q is not None else None
        if m is None or receipts.id_tag(m.id) != receipt.id_tag:
            return receipt, None
        return receipt, m

    def delete(self, queue_id: str, handles: Sequence[Any]) -> list[BatchResult]:
        """Delete the messages the handles name, as SQS does.

        A handle of the message's latest receive deletes it, even after its visibility timeout ran out, unless
        (FIFO queues) the message is no longer in flight: then the handle has expired.  A handle of an earlier
        receive succeeds and deletes nothing on a standard queue, and has expired on a FIFO queue.  A genuine
        handle of a message no longer there succeeds.
        """
        q = self.partition.queues.get(queue_id)
        fifo = q is not None and q.fifo
        if q is not None and fifo:
            q.release_due(self.now_ms())
        qtag = self.receipts.queue_tag(queue_id)
        results: list[BatchResult] = []
        seqs: list[int] = []
        for handle in handles:
            receipt, m = self._receipt_of(q, qtag, handle)
            if receipt is None:
                results.append(invalid_handle(handle))
                continue
            if m is not None:
                latest = m.receive_count == receipt.receive_no
                if fifo and (not latest or m.state != IN_FLIGHT):
                    results.append(expired_handle(handle))
                    continue
                if latest:
                    seqs.append(m.seq)
            results.append(None)
        if seqs:
            self._commit((DELETED, queue_id, seqs))
        return results

    def change_visibility(self, queue_id: str, entries: Sequence[Sequence[Any]]) -> list[BatchResult]:
        """Set new invisibility deadlines, ``timeout`` seconds from now, for received messages.

        The latest receive's handle may, even when its timeout has run out (heartbeats that run a little late
        must not fail).  On a standard queue so may an earlier receive's, which then changes the message's
        current receive: AWS accepts ending a later receive's visibility with the first receive's handle,
        though its DeleteMessage deletes nothing with such a handle (:meth:`delete`).  On a FIFO queue an
        earlier receive's handle has expired, for both, as AWS expires FIFO handles: a consumer whose receive
        was superseded must not release a group's message another consumer is working on.  The message is in
        flight until the new deadline.  A handle whose message is gone fails with that reason.
        """
        q = self.partition.queues.get(queue_id)
        now = self.now_ms()
        if q is not None:
            q.release_due(now)
        qtag = self.receipts.queue_tag(queue_id)
        results: list[BatchResult] = []
        changes: list[tuple[int, int]] = []
        for handle, timeout in entries:
            receipt, m = self._receipt_of(q, qtag, handle)
            if receipt is None:
                results.append(invalid_handle(handle))
            elif m is None:
                results.append(gone_handle(handle))
            elif q is not None and q.fifo and m.receive_count != receipt.receive_no:
                results.append(expired_handle(handle))
            else:
                results.append(None)
                changes.append((m.seq, now + int(timeout) * 1000))
        if changes:
            self._commit((VISIBILITY, queue_id, changes))
        return results

    def purge(self, queue_id: str) -> None:
        q = self.partition.queues.get(queue_id)
        if q is not None and q.msgs:
            self._commit((PURGED, queue_id))

    def drop_queue(self, queue_id: str) -> None:
        """Forget the queue, and refuse sends to its id for DROPPED_QUEUE_MEMORY_SECONDS (late senders)."""
        if queue_id in self.partition.queues or queue_id not in self.partition.dropped:
            self._commit((DROPPED, queue_id, self.now_ms()))

    def stats(self, queue_id: str, retention_seconds: int) -> tuple[int, int, int]:
        """``(visible, in_flight, delayed)``, expired messages left out."""
        q = self.partition.queues.get(queue_id)
        if q is None:
            return (0, 0, 0)
        now = self.now_ms()
        q.release_due(now)
        self._expire(q, now, retention_seconds)
        ready, delayed, in_flight = q.counts
        return (ready, in_flight, delayed)

    def peek(self, queue_id: str, max_messages: int, retention_seconds: int) -> list[tuple]:
        """Up to ``max_messages`` visible messages, oldest first, as receive rows without a receipt handle;
        changes nothing and commits no record (:mod:`.peek`)."""
        q = self.partition.queues.get(queue_id)
        return [] if q is None else peek_rows(q, self.now_ms(), max_messages, retention_seconds)

    def oldest_age_ms(self, queue_id: str, retention_seconds: int) -> int:
        """How long ago the queue's oldest message (visible, in flight or delayed) was sent; 0 when it holds
        none. Oldest by send order: a message moved in with an earlier send time (a redrive) counts from
        where it stands in that order, as retention does."""
        q = self.partition.queues.get(queue_id)
        if q is None:
            return 0
        now = self.now_ms()
        # Expiry sweeps the order from the front, so what is left there afterwards is live.
        self._expire(q, now, retention_seconds)
        msgs = q.msgs
        for seq in q.order:
            m = msgs.get(seq)
            if m is not None:
                return max(now - m.sent_ts, 0)
        return 0

    def next_change(self, queue_id: str, max_in_flight: int | None = None) -> float | None:
        """Wall-clock seconds by which a receive on the queue may find something (now, if one would), or None."""
        q = self.partition.queues.get(queue_id)
        if q is None or not q.msgs:
            return None
        now = self.now_ms()
        q.release_due(now)
        over = max_in_flight is not None and q.counts[IN_FLIGHT] >= max_in_flight
        if not over and q.has_visible():
            return now / 1000.0
        return timer_due(q.timers[0]) / 1000.0 if q.timers else None

    def _before_store(self, queue_id: str, now: int, retention_seconds: int) -> QueueState | None:
        """Refuse a queue id dropped a moment ago, and expire what its retention ended; returns the queue."""
        if queue_id in self.partition.dropped:
            raise QueueDoesNotExist()
        q = self.partition.queues.get(queue_id)
        if q is not None and q.order:
            self._expire(q, now, retention_seconds)
        return q

    def _expire(self, q: QueueState, now: int, retention_seconds: int, *, sweeping: bool = False) -> bool:
        """Expire the queue's oldest messages past their retention, :data:`STEP` at most (one record); returns
        whether it stopped there, with more perhaps left to expire."""
        if not sweeping:
            q.retention_seconds = retention_seconds
        order, slot_of, sent = q.order, q.msgs.slot, q.table.sent
        cutoff = now - retention_seconds * 1000
        expired: list[int] = []
        budget = STEP
        while order and budget:
            budget -= 1
            seq = order[0]
            slot = slot_of(seq)
            if slot >= 0:
                if sent[slot] > cutoff:
                    break
                expired.append(seq)
            order.popleft()
        if expired:
            self._commit((EXPIRED, q.queue_id, expired))
        return not budget


def _pick(
    pop: Callable[[], Message | None], n: int, cutoff: int, limit: int | None
) -> tuple[list[Message], list[int], list[Message]]:
    """Standard queue: up to ``n`` visible messages in the order ``pop`` gives them (oldest first, or by priority),
    and those expired or due for the DLQ on the way."""
    picked: list[Message] = []
    expired: list[int] = []
    dead: list[Message] = []
    while len(picked) < n:
        m = pop()
        if m is None:
            break
        if m.sent_ts <= cutoff:
            expired.append(m.seq)
            if len(expired) >= STEP:
                break
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
    while len(picked) < n and len(dead) < MAX_DEAD_LETTERS_PER_RECEIVE and len(expired) < STEP:
        name = q.pop_ready(taken)
        if name is None:
            break
        taken.add(name)
        for m in q.in_order(name):
            if m.state != READY:
                break
            if m.sent_ts <= cutoff:
                expired.append(m.seq)
                if len(expired) >= STEP:
                    break
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

