"""The counts the request path keeps: cheap enough to update on every request.

Everything here runs on the event loop's thread (the pipeline and the message actions update it; the
exposition and the CloudWatch publisher read it there too), so plain ints and lists suffice: no locks, and no
prometheus_client metric objects, whose every update takes a lock and walks the buckets in Python
(benchmarks/metrics_bench.py times what the recording adds to a request).

Series are bounded: actions outside the action table are counted as ``Unknown``, error codes come from the
error classes, and a queue's counters are forgotten once the queue has left the catalog (:meth:`forget_idle`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection
from typing import Any

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.errors import RequestThrottled, SqsError, Throttling
from ferrymq.message_size import message_bytes

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0)
"""Seconds; long polls wait up to 20 s."""
SIZE_BUCKETS = (64, 256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576)
"""Bytes, up to SQS's 1 MiB message."""
UNKNOWN_ACTION = "Unknown"
OK_CODE = "OK"
"""The ``code`` label of a request answered without error."""

QueueKey = tuple[str, str, str]
"""(account, region, queue name): the labels of a queue's series."""


def sizes_of(messages: list[dict[str, Any]]) -> list[int]:
    """The size of each message to send (the worker's message dicts, before sealing)."""
    return [message_bytes(m["body"], m["attrs"]) for m in messages]


class Histogram:
    """Counts per bucket (``le`` bounds, the last bucket unbounded) and the sum of the observed values."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)


class QueueCounters:
    """What one queue's requests did through this gateway since it started (or since the queue came back)."""

    __slots__ = ("deleted", "empty_receives", "period_max", "period_min", "received", "sent", "sizes")

    def __init__(self) -> None:
        self.sent = 0
        self.received = 0
        self.deleted = 0
        self.empty_receives = 0
        self.sizes = Histogram(SIZE_BUCKETS)
        # The smallest and largest size sent since the CloudWatch publisher last took them (its StatisticSet).
        self.period_min: int | None = None
        self.period_max: int | None = None

    def activity(self) -> int:
        """A number that grows whenever anything is counted: whether the queue was used between two looks."""
        return self.sent + self.received + self.deleted + self.empty_receives


class FrontendMetrics:
    def __init__(self, home_region: str, actions: Collection[str]) -> None:
        self._home_region = home_region
        self._actions = frozenset(actions)
        self.latency: dict[tuple[str, str], Histogram] = {}
        self.throttled: dict[str, int] = {}
        self.queues: dict[QueueKey, QueueCounters] = {}
        self.answered = 0
        """Requests counted since the start: whether any came since a look."""

    # --- the request path -----------------------------------------------------------------------------

    def request(self, action: str | None, error: BaseException | None, seconds: float) -> None:
        """One answered request: its action (None: not parsed that far), its error if any, how long it took."""
        if error is None:
            code = OK_CODE
        elif isinstance(error, SqsError):
            code = error.code
        else:
            code = "InternalFailure"
        key = (action or UNKNOWN_ACTION, code)
        histogram = self.latency.get(key)
        if histogram is None:
            histogram = self._latency_histogram(key)
        histogram.observe(seconds)
        self.answered += 1
        if error is not None and isinstance(error, Throttling | RequestThrottled):
            name = key[0] if key[0] in self._actions else UNKNOWN_ACTION
            self.throttled[name] = self.throttled.get(name, 0) + 1

    def _latency_histogram(self, key: tuple[str, str]) -> Histogram:
        action, code = key
        if action not in self._actions:
            # Any client can name any action: the series stay bounded by the action table.
            action = UNKNOWN_ACTION
        # An unknown action's requests come here every time (never cached under the name they gave), which
        # costs them a set lookup more: they were refused anyway.
        histogram = self.latency.get((action, code))
        if histogram is None:
            histogram = self.latency[(action, code)] = Histogram(LATENCY_BUCKETS)
        return histogram

    def _queue(self, queue: QueueRecord) -> QueueCounters:
        key = (queue.account, queue.region or self._home_region, queue.name)
        counters = self.queues.get(key)
        if counters is None:
            counters = self.queues[key] = QueueCounters()
        return counters

    def sent(self, queue: QueueRecord, sizes: list[int]) -> None:
        """Messages stored by a send, with the size of each as SQS counts it."""
        if not sizes:
            return
        counters = self._queue(queue)
        histogram = counters.sizes
        counts, bounds = histogram.counts, histogram.bounds
        for size in sizes:
            counts[bisect_left(bounds, size)] += 1
        histogram.sum += sum(sizes)
        counters.sent += len(sizes)
        low, high = min(sizes), max(sizes)
        if counters.period_min is None or low < counters.period_min:
            counters.period_min = low
        if counters.period_max is None or high > counters.period_max:
            counters.period_max = high

    def received(self, queue: QueueRecord, count: int) -> None:
        """A receive that returned ``count`` messages (0: an empty receive)."""
        counters = self._queue(queue)
        if count:
            counters.received += count
        else:
            counters.empty_receives += 1

    def deleted(self, queue: QueueRecord, count: int) -> None:
        if count:
            self._queue(queue).deleted += count

    # --- housekeeping -----------------------------------------------------------------------------------

    def forget_idle(self, live: Collection[QueueKey], activity: dict[QueueKey, int]) -> dict[QueueKey, int]:
        """Forget the counters of queues not in ``live`` (the catalog's, as last listed in full) that did nothing
        since the previous call, whose ``activity`` it was given back; returns the activity to pass next time.

        A queue created after the listing passed its place is missing from ``live`` but busy, so it stays; a
        deleted queue is idle from its deletion on, so it goes one call later."""
        for key in [k for k in self.queues if k not in live]:
            now = self.queues[key].activity()
            if activity.get(key) == now:
                del self.queues[key]
        return {k: c.activity() for k, c in self.queues.items() if k not in live}
