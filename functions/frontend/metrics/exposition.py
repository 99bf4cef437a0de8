"""The gateway's ``GET /metrics``: the recorder's counts and the last queue depths as Prometheus text.

Served, like the health checks, without a signature on a path no SQS request uses (a ``GET /metrics`` with a
query string or a signature is an SQS request, and left to the pipeline). A prometheus_client collector reads
the plain numbers' copy taken at scrape time and renders it in a thread: with many queues rendering takes
a while (some 10 µs a series), which the event loop must not spend. Series:

=============================================== ========== ==============================================
name                                            type       labels
=============================================== ========== ==============================================
ferrymq_request_duration_seconds                histogram  action, code (``OK`` or the SQS error code)
ferrymq_throttled_requests_total                counter    action
ferrymq_queue_messages_sent_total               counter    queue, account, region
ferrymq_queue_messages_received_total           counter    queue, account, region
ferrymq_queue_messages_deleted_total            counter    queue, account, region
ferrymq_queue_empty_receives_total              counter    queue, account, region
ferrymq_queue_sent_message_size_bytes           histogram  queue, account, region
ferrymq_queue_messages_visible                  gauge      queue, account, region
ferrymq_queue_messages_in_flight                gauge      queue, account, region
ferrymq_queue_messages_delayed                  gauge      queue, account, region
ferrymq_queue_oldest_message_age_seconds        gauge      queue, account, region
ferrymq_queue_depths_refreshed_timestamp_seconds gauge     (none)
=============================================== ========== ==============================================

Counters are the gateway's: with several gateway processes on one port, the one scraped adds its siblings'
counts to its own (:mod:`ferrymq.frontend.siblings`); gateways on other hosts add up. Depths are the workers'
(every gateway reports the same).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from ferrymq.frontend.metrics.depths import Depth, QueueDepths
from ferrymq.frontend.metrics.recorder import LATENCY_BUCKETS, SIZE_BUCKETS, FrontendMetrics, QueueKey
from ferrymq.frontend.siblings import Counts, counts_of, newest_depths
from ferrymq.protocol.responses import HttpResponse

METRICS_PATH = "/metrics"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_QUEUE_LABELS = ("queue", "account", "region")


def is_metrics_request(method: str, path: str, query_string: str, headers: dict[str, str]) -> bool:
    return method == "GET" and path == METRICS_PATH and not query_string and "authorization" not in headers


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The figures as they were at one moment, copied on the event loop so they can be rendered elsewhere."""

    counts: Counts
    """This process's counters, and its siblings' added once read (:meth:`with_siblings`)."""
    depths: list[tuple[QueueKey, Depth]] | None
    refreshed_at: float | None

    def with_siblings(self, others: list[Counts]) -> Snapshot:
        """The same figures with the sibling gateways' counts added: the port's, whichever process answers; and the
        depths a sibling collected, when newer than this process's (which collects none unless it is the one)."""
        for other in others:
            self.counts.add(other)
        newer = newest_depths(others, self.refreshed_at)
        if newer is not None:
            return replace(self, depths=list(newer.depths.items()), refreshed_at=newer.depths_at)
        return self


def snapshot(metrics: FrontendMetrics, depths: QueueDepths | None) -> Snapshot:
    """Copy the figures (cheap: a list copy per histogram); rendering them is the slow part."""
    return Snapshot(
        counts=counts_of(metrics),
        depths=list(depths.figures.items()) if depths is not None else None,
        refreshed_at=depths.refreshed_at if depths is not None else None,
    )


class SnapshotCollector(Collector):
    def __init__(self, taken: Snapshot) -> None:
        self._taken = taken

    def collect(self) -> Iterator[Metric]:
        yield from self._requests()
        yield from self._queue_counts()
        if self._taken.depths is not None:
            yield from self._queue_depths(self._taken.depths)

    def _requests(self) -> Iterator[Metric]:
        latency = HistogramMetricFamily(
            "ferrymq_request_duration_seconds", "Time from a request's arrival to its answer, by action and outcome.",
            labels=("action", "code"),
        )
        for key, (counts, total) in sorted(self._taken.counts.latency.items()):
            latency.add_metric(key, cumulative(LATENCY_BUCKETS, counts), total)
        yield latency
        throttled = CounterMetricFamily(
            "ferrymq_throttled_requests", "Requests refused by the request throttle.", labels=("action",)
        )
        for action, n in sorted(self._taken.counts.throttled.items()):
            throttled.add_metric((action,), n)
        yield throttled

    def _queue_counts(self) -> Iterator[Metric]:
        families = [
            CounterMetricFamily("ferrymq_queue_messages_sent", "Messages stored by sends.", labels=_QUEUE_LABELS),
            CounterMetricFamily("ferrymq_queue_messages_received", "Messages returned by receives.",
                                labels=_QUEUE_LABELS),
            CounterMetricFamily("ferrymq_queue_messages_deleted", "Messages deleted.", labels=_QUEUE_LABELS),
            CounterMetricFamily("ferrymq_queue_empty_receives", "Receives that returned no message.",
                                labels=_QUEUE_LABELS),
        ]
        sizes = HistogramMetricFamily("ferrymq_queue_sent_message_size_bytes",
                                      "Sizes of the messages sent (body and attributes, as SQS counts them).",
                                      labels=_QUEUE_LABELS)
        for (account, region, name), (values, counts, total) in sorted(self._taken.counts.queues.items()):
            labels = (name, account, region)
            for family, value in zip(families, values, strict=True):
                family.add_metric(labels, value)
            sizes.add_metric(labels, cumulative(SIZE_BUCKETS, counts), total)
        yield from families
        yield sizes

    def _queue_depths(self, depths: list[tuple[QueueKey, Depth]]) -> Iterator[Metric]:
        families = {
            "visible": GaugeMetricFamily("ferrymq_queue_messages_visible", "Messages available to receive.",
                                         labels=_QUEUE_LABELS),
            "in_flight": GaugeMetricFamily("ferrymq_queue_messages_in_flight",
                                           "Messages received and neither deleted nor visible again yet.",
                                           labels=_QUEUE_LABELS),
            "delayed": GaugeMetricFamily("ferrymq_queue_messages_delayed", "Messages not yet visible (delays).",
                                         labels=_QUEUE_LABELS),
            "oldest_age_seconds": GaugeMetricFamily("ferrymq_queue_oldest_message_age_seconds",
                                                    "How long ago the oldest message the queue holds was sent.",
                                                    labels=_QUEUE_LABELS),
        }
        for (account, region, name), depth in sorted(depths):
            labels = (name, account, region)
            for attribute, family in families.items():
                family.add_metric(labels, getattr(depth, attribute))
        yield from families.values()
        if self._taken.refreshed_at is not None:
            yield GaugeMetricFamily("ferrymq_queue_depths_refreshed_timestamp_seconds",
                                    "When the queue depths were last refreshed.", value=self._taken.refreshed_at)


def cumulative(bounds: tuple[float, ...], counts: list[int]) -> list[tuple[str, float]]:
    """Bucket counts as Prometheus states them: ``(le, observations <= le)``, ending with ``+Inf``."""
    out: list[tuple[str, float]] = []
    running = 0
    for bound, n in zip((*bounds, float("inf")), counts, strict=True):
        running += n
        out.append(("+Inf" if bound == float("inf") else floatToGoString(bound), running))
    return out


def render(taken: Snapshot) -> bytes:
    """Prometheus text of a snapshot and of the process's own figures (CPU, memory, open files): slow with
    many queues (some 10 µs a series), so the gateway runs it off the event loop."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(taken))
    ProcessCollector(registry=registry)
    return generate_latest(registry)


async def answer(metrics: FrontendMetrics, depths: QueueDepths | None,
                 siblings: Callable[[], list[Counts]] | None = None) -> HttpResponse:
    """The scrape's answer; with ``siblings``, their counts added (read in the rendering's thread)."""
    taken = snapshot(metrics, depths)

    def rendered() -> bytes:
        return render(taken.with_siblings(siblings()) if siblings is not None else taken)

    body = await asyncio.to_thread(rendered)
    return HttpResponse(200, [("Content-Type", CONTENT_TYPE)], body)
