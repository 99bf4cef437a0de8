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

- ``groups``: group name -> :class:`Group`, the sequence numbers of its live messages in send order and
  how many of them are in flight (move tasks wait for those);
- ``ready``: heap of ``(visible_at, received before, seq, group name)`` of each ready group's first message,
  checked when popped (the group may have changed since);
- ``dirty``: groups that changed since ``ready`` was last brought up to date; whatever may make a group
  ready (a message added, removed, or visible again) marks it dirty, and :meth:`FifoQueue.refresh` pushes
  the dirty groups that are ready.

``attempts`` remembers the receives made with a ReceiveRequestAttemptId, while they can be replayed:
each message returned by one carries that attempt id in ``Message.attempt``, and anything that touches
the message (delete, visibility change, another receive, removal) forgets the whole attempt.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from heapq import heapify, heappop, heappush
from typing import ClassVar, NamedTuple

from ferrymq.limits import RECEIVE_ATTEMPT_WINDOW_MS
from ferrymq.storage.engine.messages import IN_FLIGHT, READY, REINDEX_SLACK, Message, QueueState

ATTEMPT_WINDOW_MS = RECEIVE_ATTEMPT_WINDOW_MS


class Attempt(NamedTuple):
    ts: int
    seqs: list[int]


class Group:
    __slots__ = ("inflight", "live", "name", "seqs")

    def __init__(self, name: str) -> None:
        self.name = name
        self.seqs: deque[int] = deque()
        self.live = 0
        self.inflight = 0


class FifoQueue(QueueState):
    """The messages of one FIFO queue, their groups and replayable receive attempts."""

    fifo: ClassVar[bool] = True

    __slots__ = ("attempts", "dirty", "groups", "ready")

    def __init__(self, queue_id: str) -> None:
        super().__init__(queue_id)
        self.groups: dict[str, Group] = {}
        self.ready: list[tuple[int, bool, int, str]] = []
        self.dirty: set[str] = set()
        self.attempts: dict[str, Attempt] = {}

    def clear(self) -> None:
        super().clear()
        # A purge forgets deduplication (AWS): a message the front end sends again under a purged message's
        # id (its deduplication claim predates the purge) is stored anew, not answered as a resend.
        self.recent = {}
        self.groups = {}
        self.ready = []
        self.dirty = set()
        self.attempts = {}

    # --- message state changes ---------------------------------------------------------------------

    def add(self, m: Message, state: int) -> None:
        self._admit(m, state)
        if state != READY:
            heappush(self.timers, (m.visible_at, m.seq, 1))
        name = m.group or ""
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = Group(name)
        g.seqs.append(m.seq)
        g.live += 1
        if state == IN_FLIGHT:
            g.inflight += 1
        self.dirty.add(name)

    def remove(self, seqs: Iterable[int]) -> int:
        msgs, counts, groups = self.msgs, self.counts, self.groups
        freed = 0
        for seq in seqs:
            m = msgs.pop(seq, None)
            if m is None:
                continue
            counts[m.state] -= 1
            freed += m.size
            if m.attempt is not None:
                self.forget_attempt(m.attempt)
            name = m.group or ""
            g = groups[name]
            g.live -= 1
            if m.state == IN_FLIGHT:
                g.inflight -= 1
            if g.live == 0:
                del groups[name]
                self.dirty.discard(name)
            else:
                self.dirty.add(name)
        self.live_bytes -= freed
        return freed

    def hold(self, m: Message, until: int, state: int) -> None:
        was = m.state
        super().hold(m, until, state)
        if was != IN_FLIGHT and state == IN_FLIGHT:
            self.groups[m.group or ""].inflight += 1
        elif was == IN_FLIGHT and state != IN_FLIGHT:
            g = self.groups[m.group or ""]
            g.inflight -= 1
            self.dirty.add(g.name)

    def release_due(self, now: int) -> None:
        timers = self.timers
        if not timers or timers[0][0] > now:
            return
        msgs, counts, groups, dirty = self.msgs, self.counts, self.groups, self.dirty
        while timers and timers[0][0] <= now:
            _, seq, token = heappop(timers)
            m = msgs.get(seq)
            if m is None or m.token != token:
                continue
            name = m.group or ""
            if m.state == IN_FLIGHT:
                groups[name].inflight -= 1
            counts[m.state] -= 1
            counts[READY] += 1
            m.state = READY
            m.token = token + 1
            dirty.add(name)

    # --- finding what to deliver -----------------------------------------------------------------------

    def head(self, g: Group) -> int | None:
        """The sequence number of the group's first live message (dead entries in front are dropped)."""
        seqs, msgs = g.seqs, self.msgs
        while seqs and seqs[0] not in msgs:
            seqs.popleft()
        if len(seqs) > 2 * g.live + 16:
            g.seqs = seqs = deque(s for s in seqs if s in msgs)
        return seqs[0] if seqs else None

    def in_order(self, g: Group) -> Iterator[Message]:
        """The group's live messages in send order (change nothing in the queue while iterating)."""
        msgs = self.msgs
        for seq in g.seqs:
            m = msgs.get(seq)
            if m is not None:
                yield m

    def refresh(self) -> None:
        """Push the dirty groups that are ready onto ``ready``."""
        if not self.dirty:
            return
        groups, msgs, ready = self.groups, self.msgs, self.ready
        for name in self.dirty:
            g = groups.get(name)
            if g is None:
                continue
            first = self.head(g)
            if first is not None:
                m = msgs[first]
                if m.state == READY:
                    heappush(ready, (m.visible_at, m.receive_count > 0, first, name))
        self.dirty.clear()

    def _valid(self, visible_at: int, received: bool, first: int, name: str) -> Group | None:
        g = self.groups.get(name)
        if g is None or self.head(g) != first:
            return None
        m = self.msgs[first]
        if m.state != READY or m.visible_at != visible_at or (m.receive_count > 0) != received:
            return None
        return g

    def pop_ready(self, skip: set[str]) -> Group | None:
        """The ready group served next, taken off ``ready`` (groups in ``skip`` are passed)."""
        ready = self.ready
        while ready:
            visible_at, received, first, name = heappop(ready)
            if name in skip:
                continue
            g = self._valid(visible_at, received, first, name)
            if g is not None:
                return g
        return None

    def has_visible(self) -> bool:
        self.refresh()
        ready = self.ready
        while ready:
            if self._valid(*ready[0]) is not None:
                return True
            heappop(ready)
        return False

    def tidy(self) -> None:
        live = len(self.msgs)
        if len(self.timers) > 2 * live + REINDEX_SLACK:
            timers: list[tuple[int, int, int]] = []
            for seq, m in self.msgs.items():
                if m.state != READY:
                    m.token = token = m.token + 1
                    timers.append((m.visible_at, seq, token))
            heapify(timers)
            self.timers = timers
        if len(self.ready) > 2 * len(self.groups) + REINDEX_SLACK:
            self.ready = []
            self.dirty = set(self.groups)
        self.tidy_order()

    # --- receive attempts ------------------------------------------------------------------------------

    def forget_attempt(self, attempt_id: str) -> None:
        attempt = self.attempts.pop(attempt_id, None)
        if attempt is None:
            return
        msgs = self.msgs
        for seq in attempt.seqs:
            m = msgs.get(seq)
            if m is not None and m.attempt == attempt_id:
                m.attempt = None

    def note_received(self, ts: int, messages: list[Message], attempt_id: str | None) -> None:
        """After a receive: messages leave the attempts they belonged to and join ``attempt_id``'s."""
        for m in messages:
            if m.attempt is not None and m.attempt != attempt_id:
                self.forget_attempt(m.attempt)
        if attempt_id is not None:
            self.forget_attempt(attempt_id)
            self.attempts[attempt_id] = Attempt(ts, [m.seq for m in messages])
            for m in messages:
                m.attempt = attempt_id
        self.sweep_attempts(ts)

    def sweep_attempts(self, ts: int) -> None:
        """Forget attempts too old to replay, as of record time ``ts`` (oldest are first)."""
        attempts = self.attempts
        cutoff = ts - ATTEMPT_WINDOW_MS
        while attempts:
            attempt_id, attempt = next(iter(attempts.items()))
            if attempt.ts > cutoff:
                break
            self.forget_attempt(attempt_id)

    def is_idle(self) -> bool:
        return not self.attempts and super().is_idle()

    def replayable(self, attempt_id: str, now: int) -> list[Message] | None:
        """The messages a receive with ``attempt_id`` returned, if it may be replayed now."""
        attempt = self.attempts.get(attempt_id)
        if attempt is None or attempt.ts <= now - ATTEMPT_WINDOW_MS:
            return None
        out: list[Message] = []
        for seq in attempt.seqs:
            m = self.msgs.get(seq)
            if m is None or m.attempt != attempt_id:
                return None
            out.append(m)
        return out
