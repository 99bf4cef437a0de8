"""The per-queue figures as CloudWatch metrics, named and shaped as Amazon SQS publishes its own.

Every period the publisher puts, for each queue it knows (by dimension ``QueueName``, to the CloudWatch of the
queue's region, in ``Settings.cloudwatch_namespace``, ``AWS/SQS`` by default):

- the last depths: ApproximateNumberOfMessagesVisible, ApproximateNumberOfMessagesNotVisible (in flight),
  ApproximateNumberOfMessagesDelayed (Count) and ApproximateAgeOfOldestMessage (Seconds);
- what this gateway counted since the last period: NumberOfMessagesSent, NumberOfMessagesReceived,
  NumberOfMessagesDeleted, NumberOfEmptyReceives (Count), and SentMessageSize (Bytes) as a statistic set
  (sample count, sum, minimum, maximum) when anything was sent.

PutMetricData takes at most 1000 metric data per call; the data go in batches of that. The calls are
blocking boto3 calls, made off the event loop. A period whose calls fail is logged once and its counts are
lost (CloudWatch never sees a count twice); nothing is retried and nothing raises into the gateway.

Real CloudWatch keeps namespaces starting with ``AWS/`` for AWS's own services: against it, name another
(FERRYMQ_CLOUDWATCH_NAMESPACE). Every queue of every account goes to the one CloudWatch the gateway's
credentials reach, where queues of the same name in different accounts share their series.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ferrymq.frontend.metrics.depths import Depth, QueueDepths
from ferrymq.frontend.metrics.recorder import FrontendMetrics, QueueKey

log = logging.getLogger(__name__)

MAX_DATA_PER_CALL = 1000
"""PutMetricData's limit on metric data per request."""

Put = Callable[[str, str, list[dict[str, Any]]], None]
"""``(region, namespace, metric data)``: one PutMetricData call (blocking)."""


@dataclass(frozen=True, slots=True)
class _Counts:
    sent: int
    received: int
    deleted: int
    empty_receives: int
    size_count: int
    size_sum: float


class CloudWatchPublisher:
    def __init__(self, put: Put, metrics: FrontendMetrics, depths: QueueDepths | None, *, namespace: str,
                 wall: Callable[[], float]) -> None:
        self._put = put
        self._metrics = metrics
        self._depths = depths
        self._namespace = namespace
        self._wall = wall
        self._published: dict[QueueKey, _Counts] = {}
        """Each queue's counts as the last period took them: the next period publishes what was added since."""

    def take(self) -> dict[str, list[dict[str, Any]]]:
        """This period's metric data by region, and the counts taken as published (run on the event loop)."""
        stamp = datetime.datetime.fromtimestamp(self._wall(), tz=datetime.UTC)
        figures = self._depths.figures if self._depths is not None else {}
        by_region: dict[str, list[dict[str, Any]]] = {}
        published: dict[QueueKey, _Counts] = {}
        for key in sorted(set(figures) | set(self._metrics.queues)):
            counters = self._metrics.queues.get(key)
            now = _ZERO if counters is None else _Counts(
                counters.sent, counters.received, counters.deleted, counters.empty_receives,
                counters.sizes.count, counters.sizes.sum,
            )
            before = self._published.get(key, _ZERO)
            # Counters forgotten and started again (the queue left the catalog and came back) count from zero.
            if now.sent < before.sent or now.size_count < before.size_count or now.received < before.received:
                before = _ZERO
            sizes = None
            if counters is not None:
                if counters.period_min is not None and counters.period_max is not None:
                    sizes = (counters.period_min, counters.period_max)
                counters.period_min = counters.period_max = None
            by_region.setdefault(key[1], []).extend(queue_data(key[2], figures.get(key), now, before, sizes, stamp))
            published[key] = now
        self._published = published
        return by_region

    async def publish(self) -> None:
        """Put this period's data; failures are logged, one line for the period."""
        by_region = self.take()
        failures: list[str] = []
        calls = 0
        for region, data in by_region.items():
            for batch in batches(data):
                calls += 1
                try:
                    await asyncio.to_thread(self._put, region, self._namespace, batch)
                except Exception as exc:  # a metrics outage must never reach the gateway
                    failures.append(f"{region}: {exc}")
        if failures:
            log.warning("CloudWatch: %d of %d PutMetricData calls failed this period; their data are dropped "
                        "(first: %s)", len(failures), calls, failures[0])


_ZERO = _Counts(0, 0, 0, 0, 0, 0.0)


def queue_data(name: str, depth: Depth | None, now: _Counts, before: _Counts, sizes: tuple[int, int] | None,
               stamp: datetime.datetime) -> list[dict[str, Any]]:
    """One queue's metric data: its depth (when known) and what was counted between ``before`` and ``now``;
    ``sizes`` is the smallest and largest message sent meanwhile."""
    dimensions = [{"Name": "QueueName", "Value": name}]
    values: list[tuple[str, float, str]] = []
    if depth is not None:
        values += [
            ("ApproximateNumberOfMessagesVisible", depth.visible, "Count"),
            ("ApproximateNumberOfMessagesNotVisible", depth.in_flight, "Count"),
            ("ApproximateNumberOfMessagesDelayed", depth.delayed, "Count"),
            ("ApproximateAgeOfOldestMessage", int(depth.oldest_age_seconds), "Seconds"),
        ]
    values += [
        ("NumberOfMessagesSent", now.sent - before.sent, "Count"),
        ("NumberOfMessagesReceived", now.received - before.received, "Count"),
        ("NumberOfMessagesDeleted", max(now.deleted - before.deleted, 0), "Count"),
        ("NumberOfEmptyReceives", max(now.empty_receives - before.empty_receives, 0), "Count"),
    ]
    data: list[dict[str, Any]] = [
        {"MetricName": metric, "Dimensions": dimensions, "Timestamp": stamp, "Value": value, "Unit": unit}
        for metric, value, unit in values
    ]
    samples = now.size_count - before.size_count
    if samples > 0 and sizes is not None:
        data.append({
            "MetricName": "SentMessageSize", "Dimensions": dimensions, "Timestamp": stamp, "Unit": "Bytes",
            "StatisticValues": {"SampleCount": samples, "Sum": now.size_sum - before.size_sum,
                                "Minimum": sizes[0], "Maximum": sizes[1]},
        })
    return data


def batches(data: list[dict[str, Any]], size: int = MAX_DATA_PER_CALL) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(data), size):
        yield data[start:start + size]


def boto3_put(client_for: Callable[[str], Any]) -> Put:
    """PutMetricData through ``client_for(region)``'s client (built once per region, on first use)."""
    clients: dict[str, Any] = {}

    def put(region: str, namespace: str, data: list[dict[str, Any]]) -> None:
        client = clients.get(region)
        if client is None:
            client = clients[region] = client_for(region)
        client.put_metric_data(Namespace=namespace, MetricData=data)

    return put
