"""Messages and the per-queue indexes that find the visible ones (standard queues; FIFO queues extend them).

What a message is at time ``t`` follows from its fields: visible when ``visible_at <= t``, otherwise in flight
when it has been received and delayed when not; expired (never returned, dropped) once
``sent_ts + retention <= t``.  The per-queue indexes only make finding visible messages cheap:

- ``fresh``: deque of ``(seq, token)``, messages visible since they were sent, in send order;
- ``returned``: heap of ``(seq, token)``, messages that became visible later (delay or visibility ran out);
- ``timers``: heap of ``(visible_at, seq, token)``, delayed and in-flight messages;
- ``order``: deque of every ``seq`` in send order, swept from the front when retention runs out.

Those hold messages of priority level 0 (``docs/design/priorities.md``), which is every message of a queue that
never used priorities, so such a queue costs what it did before priorities existed.  Visible messages of a
higher level sit in ``tiers[level]`` (a :class:`Tier`: its own ``fresh`` and ``returned``), made on first use;
``credits`` is the weighted round robin's state between receives (:mod:`.priorities`), None when all zero.
Both reset when the queue holds no message.

Entries are dropped lazily: one is live while the message exists and its ``token`` (bumped whenever the
message is (re)indexed) matches.  Receiving, deleting and moving a message are O(log n); when dead entries
outnumber live messages, the indexes are rebuilt from the messages in O(n), so that cost is amortised.

Besides messages a queue keeps ``recent`` (ids of messages stored through the idempotent path, for
``ferrymq.limits.RESEND_WINDOW_MS``: a store of an id stored at ``t`` is a resend before ``t + RESEND_WINDOW_MS``
and new from then on), ``gone`` (ids of plain messages removed within ``ferrymq.limits.RESEND_HORIZON_MS``
of being sent: a resend of a send whose outcome its front end never learned must not store again what a
consumer already deleted) and ``tasks`` (its message move tasks, :mod:`.tasks`).

A resend is answered by message id alone (:meth:`QueueState.sent_recently`), never by comparing a time the
front end gives with times the workers stamped: the clocks of two machines need not agree.  The horizon is
measured on the queue's own record timeline (``last_sent_ts``, the latest time a plain send was stored, which
never goes back), so replaying the log remembers exactly what the leader remembered.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, ClassVar

from ferrymq.limits import RESEND_HORIZON_MS, RESEND_WINDOW_MS
from ferrymq.priorities import MAX_LEVELS, SYSTEM_KEY

if TYPE_CHECKING:
    from ferrymq.storage.engine.tasks import MoveTask

READY = 0
DELAYED = 1
IN_FLIGHT = 2

REINDEX_SLACK = 1024


class Message:
    __slots__ = (
        "attempt",
        "attrs",
        "body",
        "dedup_id",
        "first_receive_ts",
        "group",
        "id",
        "level",
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
        group: str | None = None,
        dedup_id: str | None = None,
        attempt: str | None = None,
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
        self.group = group
        self.dedup_id = dedup_id
        # The ReceiveRequestAttemptId of the receive that holds this message, while that receive may be replayed.
        self.attempt = attempt
        self.size = _approx_size(body, attrs)
        self.level: int = system.get(SYSTEM_KEY, 0)
        self.state = READY
        self.token = 0

    def as_restored(self) -> tuple:
        """The fields a RESTORED record carries (FIFO messages add group, dedup id and attempt)."""
        fields = (
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
        if self.group is None:
            return fields
        return (*fields, self.group, self.dedup_id, self.attempt)


def _approx_size(body: str, attrs: dict) -> int:
    size = 96 + len(body)
    if attrs:
        for name, value in attrs.items():
            size += len(name) + 16 + len(value.get("StringValue") or value.get("BinaryValue") or "")
    return size


class Tier:
    """The visible messages of one priority level above 0, indexed as a queue indexes those of level 0."""

    __slots__ = ("fresh", "returned")

    def __init__(self) -> None:
        self.fresh: deque[tuple[int, int]] = deque()
        self.returned: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self.fresh) + len(self.returned)


class QueueState:
    """The messages of one standard queue and their indexes."""

    fifo: ClassVar[bool] = False

    __slots__ = (
        "counts",
        "credits",
        "fresh",
        "gone",
        "last_sent_ts",
        "live_bytes",
        "msgs",
        "order",
        "queue_id",
        "recent",
        "retention_seconds",
        "returned",
        "tasks",
        "tiers",
        "timers",
    )

    def __init__(self, queue_id: str) -> None:
        self.queue_id = queue_id
        self.msgs: dict[int, Message] = {}
        self.fresh: deque[tuple[int, int]] = deque()
        self.returned: list[tuple[int, int]] = []
        self.timers: list[tuple[int, int, int]] = []
        self.order: deque[int] = deque()
        self.counts = [0, 0, 0]  # by state: READY, DELAYED, IN_FLIGHT
        self.live_bytes = 0
        self.tiers: list[Tier | None] | None = None
        self.credits: list[int] | None = None
        self.recent: dict[str, tuple[int, int, int]] = {}
        """Message id -> (seq, sent_ts, stored_ts) of messages stored idempotently, oldest first."""
        self.gone: dict[str, int] = {}
        """Message id -> sent_ts of plain messages removed within RESEND_HORIZON_MS of being sent, in the
        order they were removed."""
        self.last_sent_ts = 0
        """When the last plain send was stored (ms): the record time that ages ``gone``."""
        self.tasks: list[MoveTask] = []
        """Message move tasks of this queue, oldest first (the last few only)."""
        self.retention_seconds: int | None = None
        """The retention period the last request named (requests carry it; records do not), so that sweeps can
        expire messages of a queue nobody asks for; None until a request names one."""

    def clear(self) -> None:
        self.msgs = {}
        self.fresh = deque()
        self.returned = []
        self.timers = []
        self.order = deque()
        self.counts = [0, 0, 0]
        self.live_bytes = 0
        self.tiers = None
        self.credits = None

    def add(self, m: Message, state: int) -> None:
        self._admit(m, state)
        if state == READY:
            if m.level:
                self.tier(m.level).fresh.append((m.seq, 1))
            else:
                self.fresh.append((m.seq, 1))
        else:
            heappush(self.timers, (m.visible_at, m.seq, 1))

    def tier(self, level: int) -> Tier:
        """The index of visible messages of ``level`` (above 0), made on first use."""
        tiers = self.tiers
        if tiers is None:
            tiers = self.tiers = [None] * MAX_LEVELS
        t = tiers[level]
        if t is None:
            t = tiers[level] = Tier()
        return t

    def _admit(self, m: Message, state: int) -> None:
        """The part of adding ``m`` every kind of queue shares; each indexes visible messages its own way."""
        seq = m.seq
        self.msgs[seq] = m
        self.order.append(seq)
        self.live_bytes += m.size
        m.state = state
        m.token = 1
        self.counts[state] += 1

    def remove(self, seqs: Iterable[int]) -> int:
        """Forget these messages (missing ones are skipped); returns the bytes freed."""
        msgs, counts = self.msgs, self.counts
        freed = 0
        for seq in seqs:
            m = msgs.pop(seq, None)
            if m is not None:
                counts[m.state] -= 1
                freed += m.size
                self._remember_gone(m)
        self.live_bytes -= freed
        if not msgs and (self.tiers is not None or self.credits is not None):
            self.tiers = self.credits = None
        return freed

    def _remember_gone(self, m: Message) -> None:
        """Keep the id of a plain message removed soon after it was sent (one stored idempotently is in
        ``recent`` already), dropping those past the horizon."""
        if not self.last_sent_ts:
            return  # a queue nobody sent to (only stored to, as a dead-letter queue is): no plain send to resend
        horizon = self.last_sent_ts - RESEND_HORIZON_MS
        if m.sent_ts >= horizon and m.id not in self.recent:
            self.gone[m.id] = m.sent_ts
        self.forget_gone(horizon)

    def forget_gone(self, horizon: int) -> None:
        """Forget removed ids sent before ``horizon`` (ms): no resend can name them any more."""
        gone = self.gone
        while gone:
            oldest = next(iter(gone))
            if gone[oldest] >= horizon:
                break
            del gone[oldest]

    def sent_recently(self, ids: set[str]) -> set[str]:
        """Which of ``ids`` a plain send stored within the resend horizon, whether the queue still holds them
        or they were removed since (``gone``).  Held messages are looked at newest first, back to the horizon
        before the last plain send: what a resend costs is what the queue took in over the horizon, not its
        depth.  (Messages handed over keep an older ``sent_ts``; they are stored by id in ``recent``, never
        resent as plain sends, and are skipped rather than ending the walk.)"""
        gone = self.gone
        found = {i for i in ids if i in gone}
        if len(found) == len(ids):
            return found
        horizon = self.last_sent_ts - RESEND_HORIZON_MS
        msgs, recent = self.msgs, self.recent
        for seq in reversed(self.order):
            m = msgs.get(seq)
            if m is None:
                continue
            if m.sent_ts < horizon:
                if m.id in recent:
                    continue
                break
            if m.id in ids:
                found.add(m.id)
                if len(found) == len(ids):
                    break
        return found

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
            if m.level:
                heappush(self.tier(m.level).returned, (seq, token))
            else:
                heappush(returned, (seq, token))

    def pop_visible(self) -> Message | None:
        """The visible message of level 0 sent first, taken off the visible index (the caller must re-index it);
        with ``tiers`` in use, :mod:`.priorities` picks instead."""
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
        entries = len(self.fresh) + len(self.returned) + len(self.timers)
        tiers = self.tiers
        if tiers is not None:
            entries += sum(len(t) for t in tiers if t is not None)
        if entries > 2 * live + REINDEX_SLACK:
            fresh: deque[tuple[int, int]] = deque()
            timers: list[tuple[int, int, int]] = []
            self.tiers = None
            for seq, m in self.msgs.items():
                m.token = token = m.token + 1
                if m.state != READY:
                    timers.append((m.visible_at, seq, token))
                elif m.level:
                    self.tier(m.level).fresh.append((seq, token))
                else:
                    fresh.append((seq, token))
            heapify(timers)
            self.fresh, self.returned, self.timers = fresh, [], timers
        self.tidy_order()

    def tidy_order(self) -> None:
        if len(self.order) > 2 * len(self.msgs) + REINDEX_SLACK:
            self.order = deque(self.msgs)

    def has_visible(self) -> bool:
        """Whether a receive now could return something (call :meth:`release_due` first)."""
        return self.counts[READY] > 0

    def resend_of(self, message_id: str, now: int) -> tuple[int, int, int] | None:
        """``(seq, sent_ts, stored_ts)`` of ``message_id`` if the queue stored it within the resend window
        before ``now``: a store of it now is a resend."""
        known = self.recent.get(message_id)
        if known is None or known[2] <= now - RESEND_WINDOW_MS:
            return None
        return known

    def forget_resends(self, now: int) -> None:
        """Forget the ids whose resend window is over at ``now`` (the oldest are first)."""
        recent = self.recent
        cutoff = now - RESEND_WINDOW_MS
        while recent:
            oldest = next(iter(recent))
            if recent[oldest][2] > cutoff:
                break
            del recent[oldest]

    def is_idle(self) -> bool:
        """Whether the queue holds nothing that must outlive it: no messages, resend ids or move tasks."""
        return not self.msgs and not self.recent and not self.gone and not self.tasks
