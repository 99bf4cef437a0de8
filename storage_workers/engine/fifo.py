"""FIFO queues: messages delivered in send order within each message group.

A group is *ready* when its first live message is visible, whatever its later messages are doing: as AWS
does, a first message whose visibility was reset or ran out is delivered again while later messages of its
group are still in flight, and nothing after an in-flight message is.  Receives take ready groups in the order
their first message became visible (its ``visible_at``; in the same millisecond a message never received
first; then its sequence number): a group never received ranks by when it was sent, one whose first message
came back by when it came back, which is the order AWS serves groups in every case recorded against it.
Of each group a receive takes as many messages as are visible in a row, so one receive may return several
messages of one group, in order, and messages of several groups.

Indexes, on top of those of :class:`~.messages.QueueState` (``timers`` and ``order``; ``fresh`` and
``returned`` stay empty here):

- ``groups``: group name -> the sequence numbers of its live messages in send order and how many of them are in
  flight (move tasks wait for those), each group in one ``bytearray`` the garbage collector does not walk
  (:mod:`.fifo_groups`);
- ``ready``: heap of ``(visible_at, received before, seq, group name)`` of each ready group's first message,
  checked when popped (the group may have changed since);
- ``dirty``: groups that changed since ``ready`` was last brought up to date; whatever may make a group
  ready (a message added, removed, or visible again) marks it dirty, and :meth:`FifoQueue.refresh` pushes
  the dirty groups that are ready.  A dictionary of names to None, not a set: the garbage collector walks every
  set, and does not track a dictionary that holds only strings.

``attempts`` remembers the receives made with a ReceiveRequestAttemptId, while they can be replayed:
each message returned by one is in ``attempt_of`` (sequence number -> attempt id, read as ``Row.attempt``), and
anything that touches the message (delete, visibility change, another receive, removal) forgets the whole
attempt.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from heapq import heappop, heappush
from typing import Any, ClassVar, NamedTuple

from ferrymq.limits import RECEIVE_ATTEMPT_WINDOW_MS
from ferrymq.storage.engine.fifo_groups import Groups
from ferrymq.storage.engine.messages import (
    IN_FLIGHT,
    READY,
    REINDEX_SLACK,
    SEQ_MASK,
    STEP,
    TOKEN_BITS,
    TOKEN_MASK,
    QueueState,
    approx_size,
    timer,
)
from ferrymq.storage.engine.rings import Ring
from ferrymq.storage.engine.table import MessageTable
from ferrymq.storage.engine.views import Row

ATTEMPT_WINDOW_MS = RECEIVE_ATTEMPT_WINDOW_MS


class Attempt(NamedTuple):
    ts: int
    seqs: list[int]


class Group:
    """A group as checkpoints written before :mod:`.fifo_groups` hold it: only loaded, and converted at once
    (:meth:`FifoQueue.after_load`)."""

    __slots__ = ("inflight", "live", "name", "seqs")

    name: str
    seqs: Ring
    live: int
    inflight: int


class FifoQueue(QueueState):
    """The messages of one FIFO queue, their groups and replayable receive attempts."""

    fifo: ClassVar[bool] = True

    __slots__ = ("attempt_of", "attempts", "dirty", "groups", "ready")

    def __init__(self, queue_id: str, table: MessageTable, number: int) -> None:
        super().__init__(queue_id, table, number)
        self.groups = Groups()
        self.ready: list[tuple[int, bool, int, str]] = []
        self.dirty: dict[str, None] = {}
        self.attempts: OrderedDict[str, Attempt] = OrderedDict()
        """Forgotten from the oldest, as ``recent`` is (see there why ordered)."""
        self.attempt_of: dict[int, str] = {}

    def clear(self, number: int | None = None, *, free: bool = True) -> None:
        super().clear(number, free=free)
        # A purge forgets deduplication (AWS): a message the front end sends again under a purged message's
        # id (its deduplication claim predates the purge) is stored anew, not answered as a resend.
        self.recent = OrderedDict()
        self.groups = Groups()
        self.ready = []
        self.dirty = {}
        self.attempts = OrderedDict()
        self.attempt_of = {}

    # --- message state changes ---------------------------------------------------------------------

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
        size = approx_size(body, attrs)
        self.table.insert(seq, self.number, message_id, body, attrs, md5_body, md5_attrs, system, sent_ts,
                          visible_at, receive_count, first_receive_ts, group, dedup_id, size, 0, state)
        self.order.append(seq)
        self.live_bytes += size
        self.counts[state] += 1
        if state != READY:
            heappush(self.timers, timer(visible_at, seq, 1))
        if attempt is not None:
            self.attempt_of[seq] = attempt
        name = group or ""
        self.groups.add(name, seq, state == IN_FLIGHT)
        self.dirty[name] = None

    def remove(self, seqs: Iterable[int]) -> int:
        table, counts, groups, slot_of = self.table, self.counts, self.groups, self.msgs.slot
        states, sizes = table.state, table.size
        freed = 0
        for seq in seqs:
            slot = slot_of(seq)
            if slot < 0:
                continue
            state = states[slot]
            counts[state] -= 1
            freed += sizes[slot]
            attempt = self.attempt_of.get(seq)
            if attempt is not None:
                self.forget_attempt(attempt)
                self.attempt_of.pop(seq, None)
            name = table.group_of(slot) or ""
            table.free(seq, slot)
            if groups.remove(name, state == IN_FLIGHT):
                self.dirty[name] = None
            else:
                self.dirty.pop(name, None)
        self.live_bytes -= freed
        table.tidy()
        return freed

    def hold_slot(self, seq: int, slot: int, until: int, state: int) -> None:
        was = self.table.state[slot]
        super().hold_slot(seq, slot, until, state)
        if was != IN_FLIGHT and state == IN_FLIGHT:
            self.groups.flight(self.table.group_of(slot) or "", 1)
        elif was == IN_FLIGHT and state != IN_FLIGHT:
            name = self.table.group_of(slot) or ""
            self.groups.flight(name, -1)
            self.dirty[name] = None

    def release_due(self, now: int) -> None:
        timers = self.timers
        if not timers or timers[0] >> 64 > now:
            return
        table, counts, groups, dirty, slot_of = self.table, self.counts, self.groups, self.dirty, self.msgs.slot
        states, tokens = table.state, table.token
        budget = STEP
        while timers and timers[0] >> 64 <= now and budget:
            budget -= 1
            t = heappop(timers)
            seq, token = (t >> TOKEN_BITS) & SEQ_MASK, t & TOKEN_MASK
            slot = slot_of(seq)
            if slot < 0 or tokens[slot] != token:
                continue
            name = table.group_of(slot) or ""
            state = states[slot]
            if state == IN_FLIGHT:
                groups.flight(name, -1)
            counts[state] -= 1
            counts[READY] += 1
            states[slot] = READY
            tokens[slot] = (token + 1) & TOKEN_MASK
            dirty[name] = None

    # --- finding what to deliver -----------------------------------------------------------------------

    def head(self, name: str) -> int | None:
        """The sequence number of the group's first live message (dead entries in front are dropped)."""
        return self.groups.first(name, self.msgs.__contains__)

    def in_order(self, name: str) -> Iterator[Row]:
        """The group's live messages in send order (change nothing in the queue while iterating)."""
        slot_of = self.msgs.slot
        for seq in self.groups.seqs(name):
            slot = slot_of(seq)
            if slot >= 0:
                yield Row(self, seq, slot)

    def refresh(self) -> None:
        """Push the dirty groups that are ready onto ``ready``, :data:`STEP` of them at most: the first receive
        after a million messages were sent to as many groups looked at every one of them (4 s). The groups left
        dirty wait for the calls after (FIFO order holds within a group, not across groups)."""
        dirty = self.dirty
        if not dirty:
            return
        if len(dirty) <= STEP:
            names: Iterable[str] = dirty
        else:
            names = [dirty.popitem()[0] for _ in range(STEP)]
        ready, table, slot_of = self.ready, self.table, self.msgs.slot
        for name in names:
            first = self.head(name)
            if first is not None:
                slot = slot_of(first)
                if table.state[slot] == READY:
                    heappush(ready, (table.visible[slot], table.receives[slot] > 0, first, name))
        if names is dirty:
            dirty.clear()

    def _valid(self, visible_at: int, received: bool, first: int, name: str) -> bool:
        if self.head(name) != first:
            return False
        table = self.table
        slot = self.msgs.slot(first)
        return (table.state[slot] == READY and table.visible[slot] == visible_at
                and (table.receives[slot] > 0) == received)

    def pop_ready(self, skip: set[str]) -> str | None:
        """The ready group served next, taken off ``ready`` (groups in ``skip`` are passed); None too after a step
        of entries no longer ready (the calls after go on)."""
        ready = self.ready
        budget = STEP
        while ready and budget:
            budget -= 1
            visible_at, received, first, name = heappop(ready)
            if name not in skip and self._valid(visible_at, received, first, name):
                return name
        return None

    def has_visible(self) -> bool:
        """Whether a receive now may find a ready group: true too while groups are left to look at (a receive
        looks at them a step at a time)."""
        self.refresh()
        ready = self.ready
        budget = STEP
        while ready and budget:
            if self._valid(*ready[0]):
                return True
            heappop(ready)
            budget -= 1
        return bool(ready or self.dirty)

    def tidy(self) -> None:
        self.trim_order()
        self.prune_timers()
        bloated = len(self.ready) > 2 * len(self.groups) + REINDEX_SLACK
        if bloated or "ready" in self.tidying:
            self.prune_step("ready", self.ready, lambda e: self._valid(*e), bloated)
        self.tidy_order()

    # --- receive attempts ------------------------------------------------------------------------------

    def forget_attempt(self, attempt_id: str) -> None:
        attempt = self.attempts.pop(attempt_id, None)
        if attempt is None:
            return
        attempt_of = self.attempt_of
        for seq in attempt.seqs:
            if attempt_of.get(seq) == attempt_id:
                del attempt_of[seq]

    def note_received(self, ts: int, seqs: list[int], attempt_id: str | None) -> None:
        """After a receive: messages leave the attempts they belonged to and join ``attempt_id``'s."""
        attempt_of = self.attempt_of
        for seq in seqs:
            held = attempt_of.get(seq)
            if held is not None and held != attempt_id:
                self.forget_attempt(held)
        if attempt_id is not None:
            self.forget_attempt(attempt_id)
            self.attempts[attempt_id] = Attempt(ts, list(seqs))
            for seq in seqs:
                attempt_of[seq] = attempt_id
        self.sweep_attempts(ts)

    def sweep_attempts(self, ts: int) -> bool:
        """Forget attempts too old to replay, as of record time ``ts`` (oldest are first), :data:`STEP` at most;
        returns whether it stopped at the step with more perhaps left."""
        attempts = self.attempts
        cutoff = ts - ATTEMPT_WINDOW_MS
        budget = STEP
        while attempts and budget:
            attempt_id, attempt = next(iter(attempts.items()))
            if attempt.ts > cutoff:
                return False
            self.forget_attempt(attempt_id)
            budget -= 1
        return not budget

    def is_idle(self) -> bool:
        return not self.attempts and super().is_idle()

    def after_load(self) -> None:
        super().after_load()
        if type(self.attempts) is dict:
            self.attempts = OrderedDict(self.attempts)
        if isinstance(self.dirty, set):
            self.dirty = dict.fromkeys(self.dirty)
        if isinstance(self.groups, dict):  # Group objects, from a checkpoint written before Groups
            self.groups = Groups.of((name, g.seqs, g.live, g.inflight) for name, g in self.groups.items())

    def replayable(self, attempt_id: str, now: int) -> list[Row] | None:
        """The messages a receive with ``attempt_id`` returned, if it may be replayed now."""
        attempt = self.attempts.get(attempt_id)
        if attempt is None or attempt.ts <= now - ATTEMPT_WINDOW_MS:
            return None
        out: list[Row] = []
        slot_of, attempt_of = self.msgs.slot, self.attempt_of
        for seq in attempt.seqs:
            slot = slot_of(seq)
            if slot < 0 or attempt_of.get(seq) != attempt_id:
                return None
            out.append(Row(self, seq, slot))
        return out
