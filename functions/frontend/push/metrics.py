"""A push host's Prometheus series, per mapping (label ``mapping``: its UUID), served on the host's own
``/metrics`` listener:

- ``ferrymq_push_batches_total{outcome}``: batches delivered (``delivered``), failed by the target (``failed``) or
  by its answer (``invalid``);
- ``ferrymq_push_records_total{outcome}``: records deleted after delivery (``delivered``), kept by a reported
  failure or a failed batch (``kept``), deleted unmatched by the filters (``filtered``);
- ``ferrymq_push_failures_total{kind}``: ``target`` (non-2xx, function error, unreachable), ``throttled`` (429, 5xx,
  TooManyRequestsException), ``answer`` (an answer ReportBatchItemFailures cannot read), ``receive``;
- ``ferrymq_push_invoke_seconds``: how long deliveries took (histogram);
- ``ferrymq_push_concurrency``: delivery loops running; ``ferrymq_push_oldest_message_age_seconds``: the age, when
  delivered, of the oldest message of the last batch.

A mapping's series go when its poller stops, so a host's scrape names only the mappings it holds.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)


class PushMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._batches = Counter("ferrymq_push_batches", "Batches by outcome", ["mapping", "outcome"], registry=r)
        self._records = Counter("ferrymq_push_records", "Records by outcome", ["mapping", "outcome"], registry=r)
        self._failures = Counter("ferrymq_push_failures", "Failed deliveries by kind", ["mapping", "kind"],
                                 registry=r)
        self._latency = Histogram("ferrymq_push_invoke_seconds", "Delivery (invocation) latency", ["mapping"],
                                  buckets=_BUCKETS, registry=r)
        self._concurrency = Gauge("ferrymq_push_concurrency", "Delivery loops running", ["mapping"], registry=r)
        self._oldest = Gauge("ferrymq_push_oldest_message_age_seconds",
                             "Age of the oldest message of the last batch when delivered", ["mapping"], registry=r)
        self._labelled: dict[str, set[tuple[str, ...]]] = {}

    def _note(self, mapping: str, *series: tuple[str, ...]) -> None:
        self._labelled.setdefault(mapping, set()).update(series)

    def batch(self, mapping: str, outcome: str, seconds: float) -> None:
        self._batches.labels(mapping, outcome).inc()
        self._latency.labels(mapping).observe(seconds)
        self._note(mapping, ("batches", outcome), ("latency",))

    def records(self, mapping: str, outcome: str, count: int) -> None:
        if count:
            self._records.labels(mapping, outcome).inc(count)
            self._note(mapping, ("records", outcome))

    def failure(self, mapping: str, kind: str) -> None:
        self._failures.labels(mapping, kind).inc()
        self._note(mapping, ("failures", kind))

    def concurrency(self, mapping: str, loops: int) -> None:
        self._concurrency.labels(mapping).set(loops)
        self._note(mapping, ("concurrency",))

    def oldest(self, mapping: str, age_seconds: float) -> None:
        self._oldest.labels(mapping).set(max(age_seconds, 0.0))
        self._note(mapping, ("oldest",))

    def forget(self, mapping: str) -> None:
        by_name = {"batches": self._batches, "records": self._records, "failures": self._failures,
                   "latency": self._latency, "concurrency": self._concurrency, "oldest": self._oldest}
        for name, *labels in self._labelled.pop(mapping, set()):
            with contextlib.suppress(KeyError):
                by_name[name].remove(mapping, *labels)
