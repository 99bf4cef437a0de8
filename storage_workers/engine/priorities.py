"""Receiving from a standard queue whose visible messages span priority levels: smooth weighted round robin.

Levels, weights and how they meet delays, visibility and redrive: ``docs/design/priorities.md``.  A receive names
the queue's level count ``L`` (its ``FerryMQPriorityLevels``); a message stored with level ``s`` is served as
level ``min(s, L - 1)``, so a level above the queue's top (a message moved in from a queue with more levels, or
a queue whose count was lowered) is served as the top, and with ``L = 1`` every message is level 0: oldest
first, exactly as without priorities.

The scheduler is the smooth weighted round robin nginx spreads requests over weighted upstreams with.  For each
message taken, every level with a visible message adds its weight (:func:`ferrymq.priorities.weight`, 2**level)
to its credit; the level with the most credit (the higher one on a tie) is served and gives back the sum of
those weights.  While the same levels have visible messages, level ``e`` gets ``weight(e) / sum of weights`` of
the deliveries, spread evenly (two levels: high, high, low, high, high, low, ...).  A level with nothing visible
has its credit set to 0, so one that comes back after a pause neither jumps ahead with saved-up credit nor
works off an old debt; credits stay of the order of the sum of the weights.

The credits outlive a receive in ``QueueState.credits``; the engine records them (``CREDITS``) whenever a receive
changes them, so followers, replays and snapshots hold them and pick as the leader would after a failover.
Within a level messages go oldest first.  A message taken costs O(L) for the credits and O(log n) for the
index, where a queue without priorities pays the O(log n) alone (it never comes here).
"""

from __future__ import annotations

from functools import cache
from heapq import heappop

from ferrymq.priorities import MAX_LEVELS, weight
from ferrymq.storage.engine.messages import TOKEN_BITS, QueueState
from ferrymq.storage.engine.rings import Ring
from ferrymq.storage.engine.views import Row

Index = tuple[Ring, list[int]]
"""The ``fresh`` ring and ``returned`` heap of one stored level."""


@cache
def _served_as(levels: int) -> tuple[tuple[int, ...], ...]:
    """For each level a receive with ``levels`` serves, the stored levels it takes messages of."""
    top = levels - 1
    return (*((e,) for e in range(top)), tuple(range(top, MAX_LEVELS)))


class PriorityPicker:
    """Takes a queue's visible messages one at a time, level by weighted round robin, for one receive."""

    __slots__ = ("_alive", "_indexes", "_q", "_weights", "credits")

    def __init__(self, q: QueueState, levels: int) -> None:
        levels = min(max(levels, 1), MAX_LEVELS)
        self._q = q
        tiers = q.tiers
        own: list[Index | None] = [(q.fresh, q.returned)]
        for s in range(1, MAX_LEVELS):
            t = tiers[s] if tiers is not None else None
            own.append((t.fresh, t.returned) if t is not None else None)
        self._indexes: list[list[Index]] = [
            [i for i in (own[s] for s in group) if i is not None] for group in _served_as(levels)
        ]
        self._weights = [weight(e) for e in range(levels)]
        # One level has nothing to share: its credit would only ever go up and back by the same weight.
        credits = list(q.credits or ())[:levels] if levels > 1 else []
        self.credits: list[int] = credits + [0] * (levels - len(credits))
        """The credits after the messages taken so far."""
        self._alive = [self._head(indexes) is not None for indexes in self._indexes]

    def recorded_credits(self) -> list[int] | None:
        """The credits as the queue keeps them (None when all are 0)."""
        return self.credits if any(self.credits) else None

    def pop(self) -> Row | None:
        """The next message to serve, taken off its visible index (the caller re-indexes it), or None."""
        alive, credits, weights = self._alive, self.credits, self._weights
        best = -1
        total = 0
        for e in range(len(credits) - 1, -1, -1):
            if alive[e]:
                w = weights[e]
                credits[e] += w
                total += w
                if best < 0 or credits[e] > credits[best]:
                    best = e
            else:
                credits[e] = 0
        if best < 0:
            return None
        credits[best] -= total
        indexes = self._indexes[best]
        m = self._take(indexes)
        alive[best] = self._head(indexes) is not None
        return m

    def _live(self, entry: int) -> bool:
        return self._q.live_entry(entry) >= 0

    def _head(self, indexes: list[Index]) -> tuple[Index, bool] | None:
        """Which index holds the oldest live visible message of these, and whether it is ``fresh``'s first;
        dead entries in front are dropped on the way."""
        best: tuple[Index, bool] | None = None
        best_seq = 0
        for index in indexes:
            fresh, returned = index
            while fresh and not self._live(fresh[0]):
                fresh.popleft()
            while returned and not self._live(returned[0]):
                heappop(returned)
            if fresh and (not returned or fresh[0] < returned[0]):
                seq, in_fresh = fresh[0] >> TOKEN_BITS, True
            elif returned:
                seq, in_fresh = returned[0] >> TOKEN_BITS, False
            else:
                continue
            if best is None or seq < best_seq:
                best, best_seq = (index, in_fresh), seq
        return best

    def _take(self, indexes: list[Index]) -> Row:
        head = self._head(indexes)
        assert head is not None, "a level counted alive has a live message"
        (fresh, returned), in_fresh = head
        e = fresh.popleft() if in_fresh else heappop(returned)
        return self._q.msgs[e >> TOKEN_BITS]
