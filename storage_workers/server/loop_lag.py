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

Every stall of ``NOTED_SECONDS`` or more is logged (at WARNING from ``GOAL_SECONDS``) with where the loop's thread
was meanwhile, from the kernel's own account of it (the thread's ``schedstat`` under ``/proc``): on a CPU (the
worker's own Python running on the loop), waiting for a CPU (runnable, but the cores ran other threads: other
processes', or the worker's own outside the GIL) or neither (asleep: waiting for the GIL another of the worker's
threads held, in a blocking call on the loop, or for a page the kernel had to read back from disk: the count of
those major page faults is noted too). Reading the account costs about two microseconds per tick. The kept stalls
are ``ping``'s too.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import logging
import os
import resource
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import Histogram

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 0.05
BUCKET_SECONDS = 10.0
WINDOW_SECONDS = 60.0
LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
NOTED_SECONDS = 0.05
"""A stall this long or longer is logged with the account of the loop's thread, and kept for ``ping``."""
GOAL_SECONDS = 0.1
"""The longest a worker's loop should ever be held (docs/design/storage-at-scale.md): a stall past it is a WARNING."""
KEPT_STALLS = 32


@dataclass(frozen=True, slots=True)
class Stall:
    """One late wake, with where the loop's thread spent the time since the wake before it (``window``)."""

    at: float
    """When it was seen (``time.time()``)."""
    held: float
    window: float
    on_cpu: float
    waiting_for_cpu: float
    page_faults: int = 0
    """Major page faults of the loop's thread meanwhile: pages (code or data) read back from disk."""

    @property
    def asleep(self) -> float:
        """Neither on a CPU nor runnable: asleep on the GIL, a lock or a blocking call."""
        return max(self.window - self.on_cpu - self.waiting_for_cpu, 0.0)

    def describe(self) -> str:
        return (f"event loop held {self.held * 1000:.0f} ms; of the {self.window * 1000:.0f} ms since the wake "
                f"before, its thread was {self.on_cpu * 1000:.0f} ms on a CPU, {self.waiting_for_cpu * 1000:.0f} ms "
                f"waiting for a CPU and {self.asleep * 1000:.0f} ms asleep, with {self.page_faults} pages read "
                f"back from disk")

    def as_dict(self) -> dict[str, int | float]:
        return {"at": round(self.at, 3), "held_ms": round(self.held * 1000), "on_cpu_ms": round(self.on_cpu * 1000),
                "waiting_for_cpu_ms": round(self.waiting_for_cpu * 1000), "asleep_ms": round(self.asleep * 1000),
                "page_faults": self.page_faults}


class ThreadAccount:
    """The calling thread's time on a CPU and waiting for one, in seconds, as the kernel counts them, and its
    major page faults (those the thread slept on while a page was read from disk)."""

    def __init__(self) -> None:
        try:
            self._fd: int | None = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)
        except OSError:
            # No schedstat (not Linux, or a kernel without it): the thread's CPU clock, and no wait known.
            self._fd = None

    def read(self) -> tuple[float, float, int]:
        faults = resource.getrusage(resource.RUSAGE_THREAD).ru_majflt
        if self._fd is None:
            return time.thread_time(), 0.0, faults
        on_cpu, waiting, _ = os.pread(self._fd, 128, 0).split()
        return int(on_cpu) / 1e9, int(waiting) / 1e9, faults

    def bytes_read(self) -> int:
        """What the thread has read from storage rather than the page cache (0 where the kernel does not say): read
        when asked, not at each of the monitor's ticks."""
        try:
            with open("/proc/thread-self/io", "rb") as f:
                for line in f:
                    if line.startswith(b"read_bytes:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return 0

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> ThreadAccount:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
        self.stalls: deque[Stall] = deque(maxlen=KEPT_STALLS)
        """The last stalls of ``NOTED_SECONDS`` or more, oldest first."""
        self.fields: dict[str, str] = {}
        """Added to each stall's log line (the worker's id), so interleaved logs of several workers tell them apart."""
        self._account: ThreadAccount | None = None
        self._last = (0.0, 0.0, 0.0, 0)
        """At the last wake: (``clock``, seconds on a CPU, seconds waiting for one, major page faults) of the loop's
        thread."""

    def start(self) -> None:
        if self._timer is None:
            if self.trace_after > 0:
                gc.callbacks.append(self._collection)
            self._account = ThreadAccount()
            self._last = (self._clock(), *self._account.read())
            self._arm(asyncio.get_running_loop())

    async def stop(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            if self.trace_after > 0:
                faulthandler.cancel_dump_traceback_later()
                gc.callbacks.remove(self._collection)
        if self._account is not None:
            self._account.close()
            self._account = None

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._asked = self._clock() + self.interval
        self._timer = loop.call_later(self.interval, self._tick, loop)
        if self.trace_after > 0:
            faulthandler.dump_traceback_later(self.interval + self.trace_after, file=sys.stderr)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        now = self._clock()
        lag = max(now - self._asked, 0.0)
        self.record(lag)
        assert self._account is not None
        since, on_cpu, waiting, faults = self._last
        self._last = (now, *self._account.read())
        # With a trace threshold under NOTED_SECONDS, each stack dump is followed by its stall's line all the same.
        if lag >= (min(NOTED_SECONDS, self.trace_after) if self.trace_after > 0 else NOTED_SECONDS):
            self._note(Stall(time.time(), lag, now - since, self._last[1] - on_cpu, self._last[2] - waiting,
                             self._last[3] - faults))
        self._arm(loop)

    def _note(self, stall: Stall) -> None:
        self.stalls.append(stall)
        line = stall.describe()
        traced = 0 < self.trace_after <= stall.held
        if traced:
            line += f" (every thread's stack at {self.trace_after * 1000:.0f} ms is above)"
        log.log(logging.WARNING if traced or stall.held >= GOAL_SECONDS else logging.INFO, "%s", line,
                extra={**self.fields, **stall.as_dict()})

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
    def waited_for_cpu(self) -> float:
        """Seconds the loop's thread was runnable but waited for a CPU, as of the last wake (0 before a start)."""
        return self._last[2]

    @property
    def worst(self) -> float:
        """The longest stall of the last minute, in seconds (0 when none was seen)."""
        now = self._clock()
        return max((lag for start, lag in self._buckets if start > now - WINDOW_SECONDS), default=0.0)
