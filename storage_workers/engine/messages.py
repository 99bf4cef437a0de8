"""A standard queue's messages and the per-queue indexes that find the visible ones (FIFO queues extend them).

The messages themselves are rows of the partition's :class:`~.table.MessageTable`; a queue holds its number
there (``number``, each row's ``owner``), and ``msgs`` (a :class:`~.views.Messages`) reads them by sequence
number as :class:`~.views.Row` views.  What a message is at time ``t`` follows from its fields: visible when
``visible_at <= t``, otherwise in flight when it has been received and delayed when not; expired (never
returned, dropped) once ``sent_ts + retention <= t``.  The per-queue indexes only make finding visible messages
cheap, and hold plain ints, not tuples:

- ``fresh``: a :class:`~.rings.Ring` of entries ``seq << 24 | token``, messages visible since they were sent,
  in send order;
- ``returned``: heap of such entries, messages that became visible later (delay or visibility ran out);
- ``timers``: heap of ``visible_at << 64 | seq << 24 | token``, delayed and in-flight messages;
- ``order``: a ring of every ``seq`` in send order, swept from the front when retention runs out.

(A token is kept modulo 2**24 and a sequence number below 2**40: at ten thousand messages a second, a partition
uses 2**40 in three thousand years.)

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

from collections import OrderedDict
from collections.abc import Callable, Iterable
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any, ClassVar

from ferrymq.limits import RESEND_HORIZON_MS, RESEND_WINDOW_MS
from ferrymq.priorities import MAX_LEVELS, SYSTEM_KEY
from ferrymq.storage.engine.index_steps import STEP, RingCopy, prune_heap
from ferrymq.storage.engine.removed_ids import RemovedIds
from ferrymq.storage.engine.rings import Ring
from ferrymq.storage.engine.table import MessageTable
from ferrymq.storage.engine.views import Messages, Row

if TYPE_CHECKING:
    from ferrymq.storage.engine.tasks import MoveTask

READY = 0
DELAYED = 1
IN_FLIGHT = 2

REINDEX_SLACK = 1024

TOKEN_BITS = 24
TOKEN_MASK = (1 << TOKEN_BITS) - 1
SEQ_MASK = (1 << 40) - 1

Message = Row
"""A message as the request side sees it: a view of its row."""


def entry(seq: int, token: int) -> int:
    """A ``fresh``/``returned`` entry: ordered by sequence number."""
    return seq << TOKEN_BITS | token


def timer(visible_at: int, seq: int, token: int) -> int:
    """A ``timers`` entry: ordered by when the message becomes visible, then by sequence number."""
    return visible_at << 64 | seq << TOKEN_BITS | token


TIMER_ENTRY_MASK = (1 << 64) - 1
"""A ``timers`` entry's low bits: its message's :func:`entry` (sequence number and token)."""


def timer_due(t: int) -> int:
    return t >> 64


def approx_size(body: Any, attrs: Any) -> int:
    size = 96 + len(body)
    if attrs:
        for name, value in attrs.items():
            size += len(name) + 16 + len(value.get("StringValue") or value.get("BinaryValue") or "")
    return size


class Tier:
    """The visible messages of one priority level above 0, indexed as a queue indexes those of level 0."""

    __slots__ = ("fresh", "returned")

    def __init__(self) -> None:
        self.fresh = Ring()
        self.returned: list[int] = []

    def __len__(self) -> int:
        return len(self.fresh) + len(self.returned)


class QueueState:
    """The messages of one standard queue and their indexes."""

    fifo: ClassVar[bool] = False
    attempt_of: dict[int, str] | None = None
    """FIFO queues: sequence number -> the receive attempt holding the message (:mod:`.fifo`)."""

    __slots__ = (
        "counts",
        "credits",
        "fresh",
        "gone",
        "last_sent_ts",
        "live_bytes",
        "msgs",
        "number",
        "order",
        "queue_id",
        "recent",
        "retention_seconds",
        "returned",
        "table",
        "tasks",
        "tidying",
        "tiers",
        "timers",
    )

    def __init__(self, queue_id: str, table: MessageTable, number: int) -> None:
        self.queue_id = queue_id
        self.table = table
        self.number = number
        """This queue's number in ``table`` (rows' ``owner``); never reused within the partition."""
        self.msgs = Messages(self)
        self.fresh = Ring()
        self.returned: list[int] = []
        self.timers: list[int] = []
        self.order = Ring()
        self.counts = [0, 0, 0]  # by state: READY, DELAYED, IN_FLIGHT
        self.live_bytes = 0
        self.tiers: list[Tier | None] | None = None
        self.credits: list[int] | None = None
        self.tidying: dict[Any, Any] = {}
        """Index clean-ups under way (:meth:`tidy`)."""
        # Both windows are forgotten from their oldest end: an ordered dict finds it in O(1) (``gone`` is ordered
        # dicts in chunks, :mod:`.removed_ids`), where a plain dict walks past every entry deleted before it (its
        # table keeps them until it grows), which made forgetting a window quadratic: 40,000 ids forgotten at once
        # held the loop for half a second.
        self.recent: OrderedDict[str, tuple[int, int, int]] = OrderedDict()
        """Message id -> (seq, sent_ts, stored_ts) of messages stored idempotently, oldest first."""
        self.gone = RemovedIds()
        """Message id -> sent_ts of plain messages removed within RESEND_HORIZON_MS of being sent, in the
        order they were removed."""
        self.last_sent_ts = 0
        """When the last plain send was stored (ms): the record time that ages ``gone``."""
        self.tasks: list[MoveTask] = []
        """Message move tasks of this queue, oldest first (the last few only)."""
        self.retention_seconds: int | None = None
        """The retention period the last request named (requests carry it; records do not), so that sweeps can
        expire messages of a queue nobody asks for; None until a request names one."""

    def clear(self, number: int | None = None, *, free: bool = True) -> None:
        """Forget every message.  Their rows go back to the table, unless ``free`` is false: then the partition
        frees them later (``PartitionState.free_unowned``), and the queue takes ``number`` (when it goes on) so
        that none of them is its."""
        if free:
            table, slot_of = self.table, self.msgs.slot
            for seq in list(self.order):
                slot = slot_of(seq)
                if slot >= 0:
                    table.free(seq, slot)
            table.tidy()
        if number is not None:
            self.number = number
            self.msgs = Messages(self)
        self.fresh = Ring()
        self.returned = []
        self.timers = []
        self.order = Ring()
        self.counts = [0, 0, 0]
        self.live_bytes = 0
        self.tiers = None
        self.credits = None
        self.tidying = {}

    def add(
        self,
        seq: int,
        state: int,
        message_id: Any,
        body: Any,
        attrs: Any,
        md5_body: Any,
        md5_attrs: Any,
        system: Any,
        sent_ts: int,
        visible_at: int,
        receive_count: int,
        first_receive_ts: int,
        group: str | None = None,
        dedup_id: Any = None,
        attempt: str | None = None,
    ) -> None:
        """A new message, in ``state``; ``group``, ``dedup_id`` and ``attempt`` are for FIFO queues."""
        level = system.get(SYSTEM_KEY, 0) if type(system) is dict else 0
        size = approx_size(body, attrs)
        # The table is filled here and in FifoQueue.add directly: a shared helper would pass fifteen arguments
        # once more for every message stored or replayed.
        self.table.insert(seq, self.number, message_id, body, attrs, md5_body, md5_attrs, system, sent_ts,
                          visible_at, receive_count, first_receive_ts, None, None, size, level, state)
        self.order.append(seq)
        self.live_bytes += size
        self.counts[state] += 1
        if state == READY:
            if level:
                self.tier(level).fresh.append(seq << TOKEN_BITS | 1)
            else:
                self.fresh.append(seq << TOKEN_BITS | 1)
        else:
            heappush(self.timers, visible_at << 64 | seq << TOKEN_BITS | 1)

    def tier(self, level: int) -> Tier:
        """The index of visible messages of ``level`` (above 0), made on first use."""
        tiers = self.tiers
        if tiers is None:
            tiers = self.tiers = [None] * MAX_LEVELS
        t = tiers[level]
        if t is None:
            t = tiers[level] = Tier()
        return t

    def remove(self, seqs: Iterable[int], unstored: dict[int, tuple[Any, int]] | None = None) -> int:
        """Forget these messages (missing ones are skipped); returns the bytes freed.  ``unstored``: ``(message id,
        sent_ts)`` by seq of messages compaction's fold left out (:mod:`.fold`), removed here as if they were in."""
        table, counts, slot_of = self.table, self.counts, self.msgs.slot
        states, sizes, sent = table.state, table.size, table.sent
        freed = 0
        for seq in seqs:
            slot = slot_of(seq)
            if slot >= 0:
                counts[states[slot]] -= 1
                freed += sizes[slot]
                self._remember_gone(sent[slot], slot)
                table.free(seq, slot)
            elif unstored is not None:
                left_out = unstored.pop(seq, None)
                if left_out is not None:
                    self._remember_gone(left_out[1], -1, left_out[0])
        self.live_bytes -= freed
        if self.gone:
            self.forget_gone(self.last_sent_ts - RESEND_HORIZON_MS)
        table.tidy()
        if not self.msgs and (self.tiers is not None or self.credits is not None):
            self.tiers = self.credits = None
        return freed

    def _remember_gone(self, sent_ts: int, slot: int, message_id: Any = None) -> None:
        """Keep the id of a plain message removed soon after it was sent (one stored idempotently is in
        ``recent`` already); :meth:`remove` then forgets those past the horizon.  The id is read from ``slot``
        unless given."""
        if not self.last_sent_ts:
            return  # a queue nobody sent to (only stored to, as a dead-letter queue is): no plain send to resend
        if sent_ts >= self.last_sent_ts - RESEND_HORIZON_MS:
            if message_id is None:
                message_id = self.table.message_id(slot)
            if message_id not in self.recent:
                self.gone[message_id] = sent_ts

    def forget_gone(self, horizon: int) -> bool:
        """Forget removed ids sent before ``horizon`` (ms), oldest first and :data:`STEP` at most: no resend can
        name them any more, so one left for the next call changes no answer.  Returns whether it stopped at the
        step with more perhaps left."""
        return self.gone.forget_before(horizon, STEP)

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
        table, recent, slot_of = self.table, self.recent, self.msgs.slot
        for seq in reversed(self.order):
            slot = slot_of(seq)
            if slot < 0:
                continue
            message_id = table.message_id(slot)
            if table.sent[slot] < horizon:
                if message_id in recent:
                    continue
                break
            if message_id in ids:
                found.add(message_id)
                if len(found) == len(ids):
                    break
        return found

    def hold(self, m: Row, until: int, state: int) -> None:
        """Make ``m`` invisible until ``until`` (in flight or delayed)."""
        self.hold_slot(m.seq, m.slot, until, state)

    def hold_slot(self, seq: int, slot: int, until: int, state: int) -> None:
        table = self.table
        self.counts[table.state[slot]] -= 1
        self.counts[state] += 1
        table.state[slot] = state
        table.visible[slot] = until
        table.token[slot] = token = (table.token[slot] + 1) & TOKEN_MASK
        heappush(self.timers, timer(until, seq, token))

    def release_due(self, now: int) -> None:
        """Move messages whose invisibility ended by ``now`` to the visible index, at most :data:`STEP` timers a
        call: the rest are released by the calls after (a receive finds those released; counts lag meanwhile)."""
        timers = self.timers
        if not timers or timers[0] >> 64 > now:
            return
        table, returned, counts, slot_of = self.table, self.returned, self.counts, self.msgs.slot
        states, tokens, levels = table.state, table.token, table.level
        budget = STEP
        while timers and timers[0] >> 64 <= now and budget:
            budget -= 1
            t = heappop(timers)
            seq, token = (t >> TOKEN_BITS) & SEQ_MASK, t & TOKEN_MASK
            slot = slot_of(seq)
            if slot < 0 or tokens[slot] != token:
                continue
            counts[states[slot]] -= 1
            counts[READY] += 1
            states[slot] = READY
            tokens[slot] = token = (token + 1) & TOKEN_MASK
            level = levels[slot]
            if level:
                heappush(self.tier(level).returned, entry(seq, token))
            else:
                heappush(returned, entry(seq, token))

    def live_entry(self, e: int) -> int:
        """The slot of a ``fresh``/``returned`` entry's message while the entry is live, else -1 (a ``timers``
        entry's is its low bits, ``TIMER_ENTRY_MASK``)."""
        slot = self.msgs.slot(e >> TOKEN_BITS)
        if slot >= 0 and self.table.token[slot] == e & TOKEN_MASK:
            return slot
        return -1

    def pop_visible(self) -> Row | None:
        """The visible message of level 0 sent first, taken off the visible index (the caller must re-index it);
        with ``tiers`` in use, :mod:`.priorities` picks instead."""
        fresh, returned = self.fresh, self.returned
        while True:
            if fresh and (not returned or fresh[0] < returned[0]):
                e = fresh.popleft()
            elif returned:
                e = heappop(returned)
            else:
                return None
            slot = self.live_entry(e)
            if slot >= 0:
                return Row(self, e >> TOKEN_BITS, slot)

    def trim(self) -> None:
        """Drop the dead entries at the front of the send order and of the visible indexes: messages received or
        removed by a record applied here rather than picked here (a follower's, a replay's). A leader takes its
        entries off as it picks and expires; a follower's stayed, up to twice the queue's live messages before
        :meth:`tidy` rebuilt them, and a follower made leader paid for all of them in its first receive (120,000
        after a backlog's receives: 72 ms of one call). Each entry is dropped once: O(1) per record, amortized."""
        self.trim_order()
        live = self.live_entry
        _trim_visible(self.fresh, self.returned, live)
        if self.tiers is not None:
            for t in self.tiers:
                if t is not None:
                    _trim_visible(t.fresh, t.returned, live)

    def trim_order(self) -> None:
        """Drop the send order's front entries of messages no longer in the queue (see :meth:`trim`)."""
        order, slot_of = self.order, self.msgs.slot
        budget = STEP
        while order and slot_of(order[0]) < 0 and budget:
            order.popleft()
            budget -= 1

    # --- dead entries dropped a step at a time (:mod:`.index_steps`) ---------------------------------------

    def prune_timers(self) -> None:
        """Drop the dead entries of ``timers`` (messages deleted, or received again, while invisible) once they
        outnumber the messages delayed or in flight, a step a call. Measured against the whole queue instead, a
        queue of millions kept tens of thousands of deleted messages' entries, and the first receive after their
        visibility ran out popped them all at once (124 ms). The walk is of the heap, not of the queue."""
        counts = self.counts
        bloated = len(self.timers) > 2 * (counts[DELAYED] + counts[IN_FLIGHT]) + REINDEX_SLACK
        if bloated or "timers" in self.tidying:
            live = self.live_entry
            self.prune_step("timers", self.timers, lambda t: live(t & TIMER_ENTRY_MASK) >= 0, bloated)

    def prune_step(self, key: Any, heap: list[Any], live: Callable[[Any], bool], bloated: bool = False) -> None:
        """One step of removing ``heap``'s dead entries, the clean-up ``key`` of ``tidying``: begun when
        ``bloated``, gone on with at each call until its walk reaches the heap's top."""
        steps = self.tidying
        at = steps.pop(key, None)
        if at is None:
            if not bloated:
                return
            at = len(heap)
        at = prune_heap(heap, live, at)
        if at:
            steps[key] = at

    def tidy(self) -> None:
        """Drop the dead entries at the front of the send order and the visible indexes, and the rest of those of
        an index that holds more dead entries than live ones, a step a call (``tidying`` holds the clean-ups under
        way: ``"order"`` and ``("fresh", level)`` a :class:`RingCopy`, ``"timers"`` and ``("returned", level)``
        the heap place to go on from)."""
        self.trim()
        counts = self.counts
        bound = 2 * (counts[READY] + counts[DELAYED] + counts[IN_FLIGHT]) + REINDEX_SLACK
        if (
            self.tidying
            or len(self.order) > bound
            or len(self.fresh) + len(self.returned) > bound
            or self.tiers is not None
            or len(self.timers) > 2 * (counts[DELAYED] + counts[IN_FLIGHT]) + REINDEX_SLACK
        ):
            self.prune_timers()
            self.tidy_visible()
            self.tidy_order()

    def tidy_visible(self) -> None:
        steps = self.tidying
        levels = [k for k in steps if type(k) is tuple]
        if not levels:
            entries = len(self.fresh) + len(self.returned)
            tiers = self.tiers
            if tiers is not None:
                entries += sum(len(t) for t in tiers if t is not None)
            if entries <= 2 * len(self.msgs) + REINDEX_SLACK:
                return
            for level in range(len(tiers) if tiers is not None else 1):
                fresh, returned = self._visible_of(level)
                if fresh is not None:
                    steps[("fresh", level)] = RingCopy(fresh)
                    steps[("returned", level)] = len(returned)
            levels = [k for k in steps if type(k) is tuple]
        key = levels[0]
        kind, level = key
        fresh, returned = self._visible_of(level)
        live = self.live_entry
        if kind == "returned":
            # A level gone meanwhile leaves no heap to walk: an empty one ends its clean-up.
            self.prune_step(key, returned if returned is not None else [], lambda e: live(e) >= 0)
            return
        job = steps.pop(key)
        if job.source is fresh:
            copy = job.step(lambda e: live(e) >= 0)
            if copy is None:
                steps[key] = job
            elif level:
                self.tiers[level].fresh = copy  # type: ignore[index,union-attr]
            else:
                self.fresh = copy

    def _visible_of(self, level: int) -> tuple[Ring | None, list[int] | None]:
        """The visible indexes of a priority level (None: the level has none now)."""
        if not level:
            return self.fresh, self.returned
        tiers = self.tiers
        t = tiers[level] if tiers is not None and level < len(tiers) else None
        return (t.fresh, t.returned) if t is not None else (None, None)

    def tidy_order(self) -> None:
        steps = self.tidying
        job = steps.pop("order", None)
        if job is None or job.source is not self.order:
            if len(self.order) <= 2 * len(self.msgs) + REINDEX_SLACK:
                return
            job = RingCopy(self.order)
        copy = job.step(self.msgs.__contains__)
        if copy is None:
            steps["order"] = job
        else:
            self.order = copy

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

    def forget_resends(self, now: int) -> bool:
        """Forget the ids whose resend window is over at ``now`` (the oldest are first), :data:`STEP` at most;
        returns whether it stopped at the step with more perhaps left."""
        recent = self.recent
        cutoff = now - RESEND_WINDOW_MS
        budget = STEP
        while recent and budget:
            oldest = next(iter(recent))
            if recent[oldest][2] > cutoff:
                return False
            recent.popitem(last=False)
            budget -= 1
        return not budget

    def after_load(self) -> None:
        """Fill in what a checkpoint written by an earlier version left out: ``recent`` an ordered dict where it
        was a plain one, ``gone`` a :class:`RemovedIds` where it was either (their order is kept: a dict's is its
        insertion order), and no index clean-up under way where none was kept."""
        if not hasattr(self, "tidying"):
            self.tidying = {}
        if type(self.recent) is dict:
            self.recent = OrderedDict(self.recent)
        if not isinstance(self.gone, RemovedIds):
            self.gone = RemovedIds(self.gone.items())

    def is_idle(self) -> bool:
        """Whether the queue holds nothing that must outlive it: no messages, resend ids or move tasks."""
        return not self.msgs and not self.recent and not self.gone and not self.tasks


def _trim_visible(fresh: Ring, returned: list[int], live: Callable[[int], int]) -> None:
    """Drop the dead entries at the front of one level's visible indexes (:meth:`QueueState.trim`), a step at
    most of each."""
    budget = STEP
    while fresh and live(fresh[0]) < 0 and budget:
        fresh.popleft()
        budget -= 1
    budget = STEP
    while returned and live(returned[0]) < 0 and budget:
        heappop(returned)
        budget -= 1
