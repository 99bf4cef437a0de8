"""Where a group commit's write and ``fdatasync`` run: on the event loop while the disk answers quickly, in the
log's I/O thread (:mod:`.io_thread`) otherwise.

Handing a commit to the thread costs a wake-up of the thread and another of the loop when it is done; on a
virtual machine each is tens of µs, paid per commit, so at low load per message. A quick sync on the loop costs
neither, and at low load the loop has nothing else to do for those 0.1-0.3 ms but wait for it. A slow one
would hold everything else the loop serves (other partitions, receives, fetches), so one sync at or over
``quick_seconds``, wherever it ran, sends every log of the worker back to the thread until ``calm_seconds``
have passed without another. On a disk shared with a writer of a large file (a checkpoint, a compaction's
base, another worker) a sync can take tens of ms; the first such sync is the only one that can hold the loop,
and it is what the loop-lag histogram then shows. A worker starts with its syncs in the thread: recovery and a
first catch-up write the most.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class SyncPlace:
    """One per worker, shared by its logs (they share a disk): :meth:`on_loop` says where the next commit's sync
    runs; every sync's duration is :meth:`observe`-d, from the loop or from an I/O thread."""

    def __init__(
        self, quick_seconds: float, calm_seconds: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """``quick_seconds`` 0 keeps every sync in the I/O threads."""
        if quick_seconds < 0 or calm_seconds < 0:
            raise ValueError("quick_seconds and calm_seconds are not negative")
        self.quick_seconds = quick_seconds
        self.calm_seconds = calm_seconds
        self._clock = clock
        self._slow_at = clock()
        self.on_loop_syncs = 0
        """Syncs run on the loop so far."""
        self.slow_syncs = 0
        """Syncs at or over ``quick_seconds`` so far, wherever they ran."""

    def on_loop(self) -> bool:
        return self.quick_seconds > 0 and self._clock() - self._slow_at >= self.calm_seconds

    def observe(self, seconds: float, *, on_loop: bool) -> None:
        if on_loop:
            self.on_loop_syncs += 1
        if seconds < self.quick_seconds or self.quick_seconds == 0:
            return
        self.slow_syncs += 1
        now = self._clock()
        if now - self._slow_at >= self.calm_seconds:
            # Once per calm period at most: a disk under a bulk writer has many slow syncs in a row.
            log.info("an fdatasync took %.1f ms%s; syncs run in the log's I/O thread for the next %.0f s",
                     seconds * 1e3, " on the event loop" if on_loop else "", self.calm_seconds)
        self._slow_at = now
