"""A short history of every queue's figures, for the dashboard's charts: send and receive rates from the
metrics recorder's counters, and the depths the depth collector last saw, sampled every ``period`` seconds
for the last ``keep_seconds``. Memory is bounded by the queues the recorder and the collector know (both
bounded by the catalog) times the samples kept."""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ferrymq.frontend.metrics.depths import QueueDepths
from ferrymq.frontend.metrics.recorder import FrontendMetrics, QueueKey
from ferrymq.frontend.siblings import Counts, Siblings, newest_depths
from ferrymq.periodic import Periodic

KEEP_SECONDS = 600.0


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    sent_per_second: float
    received_per_second: float
    visible: int | None
    in_flight: int | None


class QueueHistory:
    def __init__(self, recorder: FrontendMetrics | None, depths: QueueDepths | None, *, period: float,
                 keep_seconds: float = KEEP_SECONDS, wall: Callable[[], float] = time.time,
                 siblings: Siblings | None = None) -> None:
        self._recorder = recorder
        self._siblings = siblings
        self._depths = depths
        self.period = period
        self._size = max(2, math.ceil(keep_seconds / period))
        self._wall = wall
        self._samples: dict[QueueKey, deque[Sample]] = {}
        self._last: dict[QueueKey, tuple[float, int, int]] = {}
        self._sampled_at: float | None = None
        self._periodic = Periodic("dashboard history: a sample", period, self._sample_with_siblings)

    def sample(self, others: Sequence[Counts] = ()) -> None:
        """Take a sample; ``others``: what the other gateway processes on this port counted, added to this one's."""
        now = self._wall()
        counters: dict[QueueKey, tuple[int, int]] = {}
        if self._recorder is not None:
            counters = {key: (c.sent, c.received) for key, c in self._recorder.queues.items()}
        for other in others:
            for key, (values, _, _) in other.queues.items():
                sent, received = counters.get(key, (0, 0))
                counters[key] = (sent + values[0], received + values[1])
        figures = self._depths.figures if self._depths is not None else {}
        # One process of a port collects the depths: the others chart what it wrote.
        newer = newest_depths(others, self._depths.refreshed_at if self._depths is not None else None)
        if newer is not None:
            figures = newer.depths
        keys = set(counters) | set(figures)
        for key in keys:
            sent, received = counters.get(key, (0, 0))
            previous = self._last.get(key)
            if previous is None and self._sampled_at is not None:
                # Counted since the last sample: the recorder keeps no counters for a queue before its first use.
                previous = (self._sampled_at, 0, 0)
            self._last[key] = (now, sent, received)
            if previous is None or now <= previous[0]:
                send_rate = receive_rate = 0.0
            else:
                elapsed = now - previous[0]
                # A counter that went back (the queue was forgotten and came back) counts from zero.
                send_rate = max(0, sent - previous[1]) / elapsed
                receive_rate = max(0, received - previous[2]) / elapsed
            depth = figures.get(key)
            samples = self._samples.get(key)
            if samples is None:
                samples = self._samples[key] = deque(maxlen=self._size)
            samples.append(Sample(now, send_rate, receive_rate, depth.visible if depth else None,
                                  depth.in_flight if depth else None))
        for key in [k for k in self._samples if k not in keys]:
            del self._samples[key]
            self._last.pop(key, None)
        self._sampled_at = now

    def of(self, key: QueueKey) -> list[Sample]:
        return list(self._samples.get(key, ()))

    def start(self) -> None:
        self._periodic.start()

    async def close(self) -> None:
        await self._periodic.close()

    async def _sample_with_siblings(self) -> None:
        self.sample(await asyncio.to_thread(self._siblings.others) if self._siblings is not None else [])
