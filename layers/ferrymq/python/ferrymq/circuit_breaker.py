"""A circuit breaker per storage worker: after ``failures`` calls in a row that it did not answer (timeouts,
refused or lost connections), calls to it fail at once for ``cooldown_seconds`` instead of each waiting out a
deadline on a worker that is likely hung or gone; then one trial call goes through, and its outcome closes
the breaker or opens it for another cooldown. Answers that are errors (NotLeader, QueueDoesNotExist, ...)
come from a working worker and count as successes.
"""

from __future__ import annotations

import enum

from ferrymq.clock import Clock


class BreakerState(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


class CircuitBreaker:
    def __init__(self, clock: Clock, *, failures: int, cooldown_seconds: float) -> None:
        if failures < 1:
            raise ValueError("a breaker opens after at least one failure")
        self._clock = clock
        self._threshold = failures
        self._cooldown = cooldown_seconds
        self._failures = 0
        self._opened_at: float | None = None

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._clock.monotonic() - self._opened_at < self._cooldown:
            return BreakerState.OPEN
        return BreakerState.HALF_OPEN

    def allow(self) -> bool:
        """Whether a call may go to the worker now. Once the cooldown is over one call goes through as a trial,
        and the next only a cooldown later: a trial whose outcome never comes cannot keep the breaker shut."""
        state = self.state
        if state is BreakerState.OPEN:
            return False
        if state is BreakerState.HALF_OPEN:
            self._opened_at = self._clock.monotonic()
        return True

    def succeeded(self) -> None:
        self._failures = 0
        self._opened_at = None

    def failed(self) -> None:
        self._failures += 1
        if self._failures >= self._threshold:
            self._opened_at = self._clock.monotonic()
