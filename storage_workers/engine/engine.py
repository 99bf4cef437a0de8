"""The queue engine: message state of standard queues as a pure state machine fed by records.

Requests (``send``, ``receive``, ...) read the state, decide, and turn every change into a record (see
:mod:`.records`) that goes through :meth:`Engine.apply` and then to ``on_record`` (the log).  Recovery,
followers and compaction call :meth:`Engine.apply` with the same records, so they reach the same state.
The engine takes time from an injected :class:`~ferrymq.clock.Clock`, and records carry their timestamps.

What a message is at time ``t`` follows from its fields: visible when ``visible_at <= t``, otherwise in flight
when it has been received and delayed when not; expired (never returned, dropped) once
``sent_ts + retention <= t``.  The per-queue indexes only make finding visible messages cheap:

- ``fresh``: deque of ``(seq, token)``, messages visible since they were sent, in send order;
- ``returned``: heap of ``(seq, token)``, messages that became visible later (delay or visibility ran out);
- ``timers``: heap of ``(visible_at, seq, token)``, delayed and in-flight messages;
- ``order``: deque of every ``seq`` in send order, swept from the front when retention runs out.

Entries are dropped lazily: one is live while the message exists and its ``token`` (bumped whenever the
message is (re)indexed) matches.  Receiving, deleting and moving a message are O(log n); when dead entries
outnumber live messages, the indexes are rebuilt from the messages in O(n), so that cost is amortised.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from heapq import heapify, heappop, heappush
from typing import Any

from ferrymq.clock import Clock
from ferrymq.errors import InvalidParameterValue, MessageNotInflight, ReceiptHandleIsInvalid
from storage_workers.engine import receipts
from storage_workers.engine.records import (
    DELETED,
    DROPPED,
    EXPIRED,
    PURGED,
    RECEIVED,
    RESTORED,
    SENT,
    SEQUENCE,
    VISIBILITY,
    Record,
)

READY = 0
DELAYED = 1
IN_FLIGHT = 2

RECEIVED_FIELDS = (
    "id",
    "receipt",
    "body",
    "attrs",
    "md5_body",
    "md5_attrs",
    "system",
    "sent_ts",
    "first_receive_ts",
    "receive_count",
)
"""Order of the tuples :meth:`Engine.receive` returns."""

_REINDEX_SLACK = 1024
_SNAPSHOT_CHUNK = 256
_NOT_INFLIGHT = (MessageNotInflight.code, "The message referred to isn't in flight.")

BatchResult = tuple[str, str] | None


class Message:
    __slots__ = (
        "attrs",
        "body",
        "first_receive_ts",
        "id",
        "md5_attrs",
        "md5_body",
        "receive_count",
        "sent_ts",
        "seq",
        "size",
        "state",
        "system",
        "token",
        "visible_at",
    )

    def __init__(
        self,
        seq: int,
        message_id: str,
        body: str,
        attrs: dict,
        md5_body: str,
        md5_attrs: str | None,
        system: dict,
        sent_ts: int,
        visible_at: int,
        receive_count: int,
        first_receive_ts: int,
    ) -> None:
        self.seq = seq
        self.id = message_id
        self.body = body
        self.attrs = attrs
        self.md5_body = md5_body
        self.md5_attrs = md5_attrs
        self.system = system
        self.sent_ts = sent_ts
        self.visible_at = visible_at
        self.receive_count = receive_count
        self.first_receive_ts = first_receive_ts
        self.size = _approx_size(body, attrs)
        self.state = READY
        self.token = 0

    def as_restored(self) -> tuple:
        return (
            self.seq,
            self.id,
            self.body,
            self.attrs,
            self.md5_body,
            self.md5_attrs,
            self.system,
            self.sent_ts,
            self.visible_at,
            self.receive_count,
            self.first_receive_ts,
        )


def _approx_size(body: str, attrs: dict) -> int:
    size = 96 + len(body)
    if attrs:
        for name, value in attrs.items():
            size += len(name) + 16 + len(value.get("StringValue") or value.get("BinaryValue") or "")
    return size


class QueueState:
    """The messages of one queue and their indexes."""

    __slots__ = ("counts", "fresh", "live_bytes", "msgs", "order", "queue_id", "returned", "tag", "timers")

    def __init__(self, queue_id: str) -> None:
        self.queue_id = queue_id
        self.tag = receipts.tag(queue_id)
        self.msgs: dict[int, Message] = {}
        self.fresh: deque[tuple[int, int]] = deque()
        self.returned: list[tuple[int, int]] = []
        self.timers: list[tuple[int, int, int]] = []
        self.order: deque[int] = deque()
        self.counts = [0, 0, 0]  # by state: READY, DELAYED, IN_FLIGHT
        self.live_bytes = 0

    def clear(self) -> None:
        self.msgs = {}
        self.fresh = deque()
        self.returned = []
        self.timers = []
        self.order = deque()
        self.counts = [0, 0, 0]
        self.live_bytes = 0

    def add(self, m: Message, state: int) -> None:
        seq = m.seq
        self.msgs[seq] = m
        self.order.append(seq)
        self.live_bytes += m.size
        m.state = state
        m.token = 1
        self.counts[state] += 1
        if state == READY:
            self.fresh.append((seq, 1))
        else:
            heappush(self.timers, (m.visible_at, seq, 1))

    def remove(self, seqs: Iterable[int]) -> int:
        """Forget these messages (missing ones are skipped); returns the bytes freed."""
        msgs, counts = self.msgs, self.counts
        freed = 0
        for seq in seqs:
            m = msgs.pop(seq, None)
            if m is not None:
                counts[m.state] -= 1
                freed += m.size
        self.live_bytes -= freed
        return freed

    def hold(self, m: Message, until: int, state: int) -> None:
        """Make ``m`` invisible until ``until`` (in flight or delayed)."""
        self.counts[m.state] -= 1
        self.counts[state] += 1
        m.state = state
        m.visible_at = until
        m.token = token = m.token + 1
        heappush(self.timers, (until, m.seq, token))

    def release_due(self, now: int) -> None:
        """Move messages whose invisibility ended by ``now`` to the visible index."""
        timers = self.timers
        if not timers or timers[0][0] > now:
            return
        msgs, returned, counts = self.msgs, self.returned, self.counts
        while timers and timers[0][0] <= now:
            _, seq, token = heappop(timers)
            m = msgs.get(seq)
            if m is None or m.token != token:
                continue
            counts[m.state] -= 1
            counts[READY] += 1
            m.state = READY
            m.token = token = token + 1
            heappush(returned, (seq, token))

    def pop_visible(self) -> Message | None:
        """The visible message sent first, taken off the visible index (the caller must re-index it)."""
        fresh, returned, msgs = self.fresh, self.returned, self.msgs
        while True:
            if fresh and (not returned or fresh[0][0] < returned[0][0]):
                seq, token = fresh.popleft()
            elif returned:
                seq, token = heappop(returned)
            else:
                return None
            m = msgs.get(seq)
            if m is not None and m.token == token:
                return m

    def tidy(self) -> None:
        """Rebuild indexes that hold more dead entries than live ones."""
        live = len(self.msgs)
        if len(self.fresh) + len(self.returned) + len(self.timers) > 2 * live + _REINDEX_SLACK:
            fresh: deque[tuple[int, int]] = deque()
            timers: list[tuple[int, int, int]] = []
            for seq, m in self.msgs.items():
                m.token = token = m.token + 1
                if m.state == READY:
                    fresh.append((seq, token))
                else:
                    timers.append((m.visible_at, seq, token))
            heapify(timers)
            self.fresh, self.returned, self.timers = fresh, [], timers
        if len(self.order) > 2 * live + _REINDEX_SLACK:
            self.order = deque(self.msgs)


class Engine:
    """Message state of every queue of one partition."""

    def __init__(self, clock: Clock, on_record: Callable[[Record], None] | None = None) -> None:
        self.clock = clock
        self.on_record = on_record
        self.queues: dict[str, QueueState] = {}
        self.next_seq = 1
        self.live_bytes = 0
        """Rough size of the live messages, to tell when the log is worth compacting."""

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

    def send(self, queue_id: str, messages: Sequence[Sequence[Any]], retention_seconds: int) -> int:
        """Store messages given as ``(id, body, attrs, md5_body, md5_attrs, delay, system)``; returns sent_ts."""
        now = self.now_ms()
        if not messages:
            return now
        q = self.queues.get(queue_id)
        if q is not None and q.order:
            self._expire(q, now, retention_seconds)
        self._commit((SENT, queue_id, now, self.next_seq, messages))
        return now

    def receive(self, queue_id: str, max_messages: int, visibility_timeout: int, retention_seconds: int) -> list[tuple]:
        """Up to ``max_messages`` visible messages, now in flight, as tuples ordered like RECEIVED_FIELDS."""
        q = self.queues.get(queue_id)
        if q is None or not q.msgs:
            return []
        now = self.now_ms()
        q.release_due(now)
        self._expire(q, now, retention_seconds)
        cutoff = now - retention_seconds * 1000
        picked: list[Message] = []
        expired: list[int] = []
        while len(picked) < max_messages:
            m = q.pop_visible()
            if m is None:
                break
            if m.sent_ts <= cutoff:
                expired.append(m.seq)
            else:
                picked.append(m)
        if expired:
            self._commit((EXPIRED, queue_id, expired))
        if not picked:
            return []
        self._commit((RECEIVED, queue_id, now, now + visibility_timeout * 1000, [m.seq for m in picked]))
        qtag, encode, tag = q.tag, receipts.encode, receipts.tag
        return [
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
            for m in picked
        ]

    def delete(self, queue_id: str, handles: Sequence[Any]) -> list[BatchResult]:
        """Delete the messages the handles name; a well-formed handle of a gone message succeeds too."""
        q = self.queues.get(queue_id)
        qtag = q.tag if q is not None else receipts.tag(queue_id)
        results: list[BatchResult] = []
        seqs: list[int] = []
        for handle in handles:
            receipt = receipts.decode(handle)
            if receipt is None or receipt.queue_tag != qtag:
                results.append(_invalid_handle(handle))
                continue
            results.append(None)
            m = q.msgs.get(receipt.seq) if q is not None else None
            if m is not None and receipts.tag(m.id) == receipt.id_tag:
                seqs.append(receipt.seq)
        if seqs:
            self._commit((DELETED, queue_id, seqs))
        return results

    def change_visibility(self, queue_id: str, entries: Sequence[Sequence[Any]]) -> list[BatchResult]:
        """Set new invisibility deadlines, ``timeout`` seconds from now, for in-flight messages."""
        q = self.queues.get(queue_id)
        qtag = q.tag if q is not None else receipts.tag(queue_id)
        now = self.now_ms()
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

    def next_change(self, queue_id: str) -> float | None:
        """Wall-clock seconds by which a message of the queue may become visible (now, if one is), or None."""
        q = self.queues.get(queue_id)
        if q is None or not q.msgs:
            return None
        now = self.now_ms()
        q.release_due(now)
        if q.counts[READY]:
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
            q = self.queues.get(record[1])
            if q is not None:
                msgs = q.msgs
                for seq, deadline in record[2]:
                    m = msgs.get(seq)
                    if m is not None:
                        q.hold(m, deadline, IN_FLIGHT)
                q.tidy()
        elif kind == PURGED:
            q = self.queues.get(record[1])
            if q is not None:
                self.live_bytes -= q.live_bytes
                q.clear()
        elif kind == DROPPED:
            q = self.queues.pop(record[1], None)
            if q is not None:
                self.live_bytes -= q.live_bytes
        elif kind == RESTORED:
            self._apply_restored(record)
        elif kind == SEQUENCE:
            self.next_seq = max(self.next_seq, record[1])
        else:
            raise ValueError(f"unknown record kind {kind!r}")

    def _queue(self, queue_id: str) -> QueueState:
        q = self.queues.get(queue_id)
        if q is None:
            q = self.queues[queue_id] = QueueState(queue_id)
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

    def _apply_received(self, record: Record) -> None:
        _, queue_id, ts, deadline, seqs = record
        q = self.queues.get(queue_id)
        if q is None:
            return
        msgs = q.msgs
        for seq in seqs:
            m = msgs.get(seq)
            if m is not None:
                if m.receive_count == 0:
                    m.first_receive_ts = ts
                m.receive_count += 1
                q.hold(m, deadline, IN_FLIGHT)
        q.tidy()

    def _apply_restored(self, record: Record) -> None:
        _, queue_id, items = record
        q = self._queue(queue_id)
        before = q.live_bytes
        top = self.next_seq
        for seq, message_id, body, attrs, md5_body, md5_attrs, system, sent_ts, visible_at, count, first in items:
            m = Message(seq, message_id, body, attrs, md5_body, md5_attrs, system, sent_ts, visible_at, count, first)
            # Indexed as invisible until visible_at; the first release_due sorts out which are visible now.
            q.add(m, IN_FLIGHT if count > 0 else DELAYED)
            top = max(top, seq + 1)
        self.live_bytes += q.live_bytes - before
        self.next_seq = top

    # --- snapshots ---------------------------------------------------------------------------------

    def snapshot(self) -> Iterator[Record]:
        """Records that rebuild the current state from nothing (what compaction writes)."""
        yield (SEQUENCE, self.next_seq)
        for queue_id, q in self.queues.items():
            chunk: list[tuple] = []
            for m in q.msgs.values():
                chunk.append(m.as_restored())
                if len(chunk) >= _SNAPSHOT_CHUNK:
                    yield (RESTORED, queue_id, chunk)
                    chunk = []
            if chunk:
                yield (RESTORED, queue_id, chunk)

    def state(self) -> dict[str, list[tuple]]:
        """Every live message's fields by queue, in send order: what must survive replay and compaction."""
        return {qid: [m.as_restored() for m in q.msgs.values()] for qid, q in self.queues.items() if q.msgs}


def _invalid_handle(handle: object) -> tuple[str, str]:
    return (ReceiptHandleIsInvalid.code, f'The input receipt handle "{handle}" is not a valid receipt handle.')


def _gone_handle(handle: object) -> tuple[str, str]:
    return (
        InvalidParameterValue.code,
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not "
        "available for visibility timeout change.",
    )
