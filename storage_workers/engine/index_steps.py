"""A queue's indexes rid of their dead entries a step at a time (:data:`STEP` entries a call).

Entries are dropped lazily (:mod:`.messages`), so an index can fill with the entries of messages long gone: the
send order behind one message held for days, the timers of messages deleted while in flight.  Rebuilding such an
index whole cost O(queue) in one call: 0.3-0.5 s at a million messages, the worker's loop held all along.  Here each
call does a bounded step while the index stays in use:

- a ring (send order, visible in send order) is copied, its live entries only, into a new ring a step at a time;
  the old one serves meanwhile, and the copy takes its place once it has reached the end (entries taken from the
  old one's front meanwhile may be in the copy: they are dead, or about to be, and are dropped as any dead entry);
- a heap loses its dead entries in place, each removal keeping it a heap, walking from its end towards its top.

Either may leave a dead entry behind (one that died after the walk passed it): a later pass takes it.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import _siftdown, _siftup, heapify  # type: ignore[attr-defined]
from typing import Any

from ferrymq.storage.engine.rings import Ring

STEP = 4096
"""The most one call does to a queue's indexes in one go (timers released, messages expired by one record, removed
ids forgotten, rows of a purged queue freed, index entries looked at here): a queue of millions costs a worker's
loop a few milliseconds at a time, never a long stall. What is left is done by the calls after."""


WHOLE_HEAP = 8 * STEP
"""A heap this small is pruned in one go (:func:`prune_heap`)."""


class RingCopy:
    """The live entries of ``source`` being copied into ``into``, from ``place`` on (:meth:`Ring.chunk`)."""

    __slots__ = ("into", "place", "source")

    def __init__(self, source: Ring) -> None:
        self.source = source
        self.into = Ring()
        self.place = source.taken

    def step(self, live: Callable[[int], bool]) -> Ring | None:
        """Copy one step's live entries; returns the whole copy once it reached the source's end."""
        part, self.place = self.source.chunk(self.place, STEP)
        append = self.into.append
        for e in part:
            if live(e):
                append(e)
        return self.into if len(part) < STEP else None


def prune_heap(heap: list[Any], live: Callable[[Any], bool], at: int) -> int:
    """Remove the dead entries among the ``STEP`` places below ``at``; returns the place to go on from (0: the
    walk reached the top).  A heap of a few steps is filtered and heapified whole instead: that costs a third
    of removing its dead entries one by one, and stays within a step's time."""
    if len(heap) <= WHOLE_HEAP:
        heap[:] = [e for e in heap if live(e)]
        heapify(heap)
        return 0
    i = min(at, len(heap))
    stop = max(i - STEP, 0)
    while i > stop:
        i -= 1
        if i < len(heap) and not live(heap[i]):
            # Its place is taken by the last entry, the dead ones at the end dropped first; reaching ``i`` that
            # way, the entry taken is the dead one at ``i``.
            last = heap.pop()
            while not live(last) and len(heap) > i:
                last = heap.pop()
            if len(heap) > i:
                heap[i] = last
                _siftup(heap, i)
                _siftdown(heap, 0, i)
    return i
