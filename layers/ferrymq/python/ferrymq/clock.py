"""Time as an injected dependency, so timeouts, delays and retention are testable without sleeping."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

TIMER_SLACK = 0.001
"""The event loop keeps time in milliseconds: a timer may fire up to this much early."""


def fired_early(loop: asyncio.AbstractEventLoop, deadline: float) -> bool:
    """Whether a timer armed for ``deadline`` (loop time) fired early: one that stays armed across many deadlines
    checks, when it fires, whether the one it now stands for has come, and if not is armed again for it."""
    return loop.time() + TIMER_SLACK < deadline


class Clock(Protocol):
    def now(self) -> float:
        """Wall-clock seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards, for measuring intervals."""
        ...


class SystemClock:
    def __init__(self, skew_seconds: float = 0.0) -> None:
        """``skew_seconds`` offsets the wall clock (tests of clock skew between machines,
        ``FERRYMQ_WORKER_CLOCK_SKEW_MS``); the monotonic clock has no meaning across machines and is not offset."""
        self._skew = skew_seconds

    def now(self) -> float:
        return time.time() + self._skew

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock tests move by hand."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._mono = 0.0

    def now(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += seconds
        self._mono += seconds

    def step_wall(self, seconds: float) -> None:
        """Move the wall clock alone, as an NTP step does (backwards when negative); the monotonic one stays."""
        self._now += seconds
