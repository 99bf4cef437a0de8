"""What the gateway's metrics add to a request, measured on the recording calls themselves.

    python benchmarks/metrics_bench.py

benchmarks/frontend_bench.py times whole requests against a running stack (run it with
FERRYMQ_METRICS_ENABLED=0 FERRYMQ_CLOUDWATCH_ENABLED=0 for the figures without metrics); on a shared
machine its run-to-run noise is tens of µs, far above what recording costs. This times exactly the work the
request path does for metrics: the latency observation every request makes, and the per-queue counts and
sizes of a SendMessage, a 10-message SendMessageBatch, a ReceiveMessage and a DeleteMessage. It also times
one scrape of 1000 queues: the copy the event loop makes, and the rendering a thread does. It prints figures
and asserts nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.frontend.actions import ACTIONS
from ferrymq.frontend.metrics.depths import Depth, QueueDepths
from ferrymq.frontend.metrics.exposition import render, snapshot
from ferrymq.frontend.metrics.recorder import FrontendMetrics, sizes_of


def per_call(fn: Callable[[], None], n: int = 200_000) -> float:
    """Best of five runs, in µs per call."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - started) / n * 1e6)
    return best


def main() -> None:
    metrics = FrontendMetrics("us-east-1", ACTIONS)
    queue = QueueRecord(account="000000000000", name="bench", queue_id="q-1", partition=0)
    one = [{"body": "x" * 256, "attrs": {}}]
    ten = one * 10

    def send() -> None:
        metrics.request("SendMessage", None, 0.0004)
        metrics.sent(queue, sizes_of(one))

    def batch() -> None:
        metrics.request("SendMessageBatch", None, 0.0007)
        metrics.sent(queue, sizes_of(ten))

    def receive() -> None:
        metrics.request("ReceiveMessage", None, 0.0004)
        metrics.received(queue, 10)

    def delete() -> None:
        metrics.request("DeleteMessage", None, 0.0004)
        metrics.deleted(queue, 1)

    def other() -> None:
        metrics.request("GetQueueUrl", None, 0.0001)

    for label, fn in [("GetQueueUrl (latency only)", other), ("SendMessage, 256 B", send),
                      ("SendMessageBatch, 10 x 256 B", batch), ("ReceiveMessage, 10 messages", receive),
                      ("DeleteMessage", delete)]:
        print(f"{label:<32} {per_call(fn):6.2f} µs per request")

    async def nothing(limit: int, start: object) -> tuple[list[QueueRecord], None]:
        return [], None

    depths = QueueDepths(nothing, lambda q: None, home_region="us-east-1", max_queues=1000)  # type: ignore[arg-type]
    for i in range(1000):
        q = QueueRecord(account="000000000000", name=f"q{i}", queue_id=f"id{i}", partition=0)
        metrics.sent(q, [100])
        depths.figures[("000000000000", "us-east-1", f"q{i}")] = Depth(1, 2, 3, 4.0)
    taking = per_call(lambda: snapshot(metrics, depths) and None, 20) / 1000
    rendering = per_call(lambda: render(snapshot(metrics, depths)) and None, 3) / 1000
    print(f"{'scrape of 1000 queues':<32} {taking:6.1f} ms on the event loop, {rendering:6.1f} ms in a thread")


if __name__ == "__main__":
    main()
