"""How far recovery has got, told in the log while a large log is replayed.

Replaying a log of a few hundred thousand messages takes seconds, during which the worker is not ready and
``ferrymq up`` (whose console the workers' stderr is) would otherwise say nothing. Recovery reports every
``interval`` seconds, and, for a log of at least ``step_min_bytes``, at every ``step`` of its bytes (so a large
log says how far it is even on a fast disk); a small log only says, at the end, what it replayed and how long
that took. Each line carries its figures as fields too (``segments_done``, ``records_done``, ``bytes_done``...).

:meth:`RecoveryProgress.update` runs once per batch replayed: it only compares two numbers until a line is due.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 2.0
DEFAULT_STEP = 0.1
DEFAULT_STEP_MIN_BYTES = 4 * 1024 * 1024


class RecoveryProgress:
    """Progress lines of one log's recovery: :meth:`start`, :meth:`update` per batch, :meth:`segment_done`
    per segment, :meth:`finish`."""

    def __init__(
        self,
        name: str,
        *,
        interval: float = DEFAULT_INTERVAL_SECONDS,
        step: float = DEFAULT_STEP,
        step_min_bytes: int = DEFAULT_STEP_MIN_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.interval = interval
        self.step = step
        self.step_min_bytes = step_min_bytes
        self.clock = clock
        self.segments_total = 0
        self.segments_done = 0
        self.bytes_total = 0
        self.lines = 0
        self._started = 0.0
        self._next_time = 0.0
        self._step_bytes = 0
        self._next_bytes = 0

    def start(self, segments: int, total_bytes: int) -> None:
        self.segments_total, self.bytes_total = segments, total_bytes
        self._started = self.clock()
        self._next_time = self._started + self.interval
        # A small log reports by time only: ten lines for a log replayed in a blink would be noise.
        self._step_bytes = max(1, int(total_bytes * self.step)) if total_bytes >= self.step_min_bytes else 0
        self._next_bytes = self._step_bytes or total_bytes + 1
        if self._step_bytes:
            log.info("recovering %s: %d segments, %d bytes", self.name, segments, total_bytes,
                     extra=self._fields(0, 0))

    def segment_done(self) -> None:
        self.segments_done += 1

    def update(self, records: int, done_bytes: int) -> None:
        """``records`` replayed and ``done_bytes`` of the log read so far."""
        if done_bytes < self._next_bytes and self.clock() < self._next_time:
            return
        now = self.clock()
        self._next_time = now + self.interval
        if self._step_bytes:
            while self._next_bytes <= done_bytes:
                self._next_bytes += self._step_bytes
        percent = 100.0 * done_bytes / self.bytes_total if self.bytes_total else 100.0
        self.lines += 1
        log.info(
            "recovering %s: %.0f%% (%d of %d segments, %d records, %d of %d bytes)",
            self.name, percent, self.segments_done, self.segments_total, records, done_bytes, self.bytes_total,
            extra=self._fields(records, done_bytes),
        )

    def finish(self, records: int) -> None:
        seconds = self.clock() - self._started
        log.info(
            "recovered %s: %d records from %d segments (%d bytes) in %.2f s",
            self.name, records, self.segments_total, self.bytes_total, seconds,
            extra={**self._fields(records, self.bytes_total), "seconds": round(seconds, 3)},
        )

    def _fields(self, records: int, done_bytes: int) -> dict[str, object]:
        return {
            "log_dir": self.name,
            "segments_done": self.segments_done,
            "segments_total": self.segments_total,
            "records_done": records,
            "bytes_done": done_bytes,
            "bytes_total": self.bytes_total,
        }
