"""How late the worker's event loop wakes: the stall every request waiting on it sees.

A timer fires every ``interval`` seconds on the loop's monotonic clock and records how much later than asked
it ran. Anything that holds the loop (a replay, a snapshot encoded at once, a long scan) shows as one late
wake of about that length. Each lateness goes into a Prometheus histogram (``ferrymq_worker_loop_lag_seconds``,
registered by :func:`~.metrics.worker_registry`), and the worst of the last minute is kept for ``ping``
(``ferrymq cluster status``) and the ``ferrymq_worker_loop_lag_worst_seconds`` gauge.

The worst is kept per ``BUCKET_SECONDS`` bucket, the last ``WINDOW_SECONDS`` of them, so it forgets a stall a
minute later without storing every sample. Costs one timer wake-up per interval (20 a second by default), a
plain callback rather than a sleeping task: no future and no task step per wake, about a sixth less of an idle
worker's CPU for it.

With ``trace_after`` set (``FERRYMQ_WORKER_STALL_TRACE_MS``), each tick also arms :mod:`faulthandler`'s watchdog
for the next tick's due time plus that much: a loop held longer gets every thread's stack written to standard error
by the watchdog's own thread, while the loop is still held, which names the code holding it where the histogram
only says that something did. A stack cannot show the garbage collector (it runs inside whatever allocated), so
every collection taking half that threshold or more is logged too, with its generation. The watchdog is one per
process; arming it starts a thread, hence off by default.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import logging
import sys
import time
from collections import deque
from collections.abc import Callable

from prometheus_client import Histogram

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 0.05
BUCKET_SECONDS = 10.0
WINDOW_SECONDS = 60.0
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LoopLagMonitor:
    def __init__(
        self,
        *,
        interval: float = INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        trace_after: float = 0.0,
    ) -> None:
        self.interval = interval
        self.trace_after = trace_after
        """Seconds a tick may be late before every thread's stack is written to standard error; 0: never."""
        self._clock = clock
        self.histogram = Histogram(
            "ferrymq_worker_loop_lag_seconds",
            "How much later than asked the worker's event loop woke a timer: how long it was held.",
            buckets=LAG_BUCKETS,
            registry=None,
        )
        self._buckets: deque[tuple[float, float]] = deque()
        """(bucket start, worst lag in it), oldest first, the last WINDOW_SECONDS."""
        self._timer: asyncio.TimerHandle | None = None
        self._asked = 0.0
        """When the armed timer was asked to fire (``clock``)."""
        self._collecting = 0.0
        """When the collection under way began (``time.perf_counter``), while tracing."""

    def start(self) -> None:
        if self._timer is None:
            if self.trace_after > 0:
                gc.callbacks.append(self._collection)
            self._arm(asyncio.get_running_loop())

    async def stop(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            if self.trace_after > 0:
                faulthandler.cancel_dump_traceback_later()
                gc.callbacks.remove(self._collection)

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._asked = self._clock() + self.interval
        self._timer = loop.call_later(self.interval, self._tick, loop)
        if self.trace_after > 0:
            faulthandler.dump_traceback_later(self.interval + self.trace_after, file=sys.stderr)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        lag = max(self._clock() - self._asked, 0.0)
        self.record(lag)
        if 0 < self.trace_after <= lag:
            log.warning("event loop held %.0f ms (every thread's stack at %.0f ms is above)",
                        lag * 1000, self.trace_after * 1000)
        self._arm(loop)

    def _collection(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._collecting = time.perf_counter()
            return
        took = time.perf_counter() - self._collecting
        if took >= self.trace_after / 2:
            log.warning("garbage collection of generation %d took %.0f ms (%d objects collected)",
                        info["generation"], took * 1000, info["collected"])

    def record(self, lag: float) -> None:
        """One wake-up ``lag`` seconds late."""
        self.histogram.observe(lag)
        now = self._clock()
        start = now - now % BUCKET_SECONDS
        buckets = self._buckets
        if buckets and buckets[-1][0] == start:
            if lag > buckets[-1][1]:
                buckets[-1] = (start, lag)
        else:
            buckets.append((start, lag))
        while buckets and buckets[0][0] <= now - WINDOW_SECONDS:
            buckets.popleft()

    @property
    def worst(self) -> float:
        """The longest stall of the last minute, in seconds (0 when none was seen)."""
        now = self._clock()
        return max((lag for start, lag in self._buckets if start > now - WINDOW_SECONDS), default=0.0)
