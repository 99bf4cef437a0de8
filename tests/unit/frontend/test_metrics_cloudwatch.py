"""The CloudWatch publisher's metric data, made from the recorder and the depths (PutMetricData recorded in
memory here; tests/e2e/test_metrics.py reads them back from the stand-in's CloudWatch)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.frontend.actions import ACTIONS
from ferrymq.frontend.metrics.cloudwatch import MAX_DATA_PER_CALL, CloudWatchPublisher
from ferrymq.frontend.metrics.depths import Depth, QueueDepths
from ferrymq.frontend.metrics.recorder import FrontendMetrics

ACCOUNT = "000000000000"
ORDERS = QueueRecord(account=ACCOUNT, name="orders", queue_id="q-1", partition=0)


class Puts:
    def __init__(self, failing: bool = False) -> None:
        self.calls: list[tuple[str, str, list[dict[str, Any]]]] = []
        self.failing = failing

    def __call__(self, region: str, namespace: str, data: list[dict[str, Any]]) -> None:
        self.calls.append((region, namespace, data))
        if self.failing:
            raise ConnectionError("CloudWatch is unreachable")


def values(data: list[dict[str, Any]], queue: str = "orders") -> dict[str, Any]:
    return {
        d["MetricName"]: d.get("Value", d.get("StatisticValues"))
        for d in data
        if d["Dimensions"] == [{"Name": "QueueName", "Value": queue}]
    }


@pytest.fixture
def metrics() -> FrontendMetrics:
    return FrontendMetrics("us-east-1", ACTIONS)


def publisher(puts: Puts, metrics: FrontendMetrics, depths: QueueDepths | None = None) -> CloudWatchPublisher:
    return CloudWatchPublisher(puts, metrics, depths, namespace="AWS/SQS", wall=lambda: 1_700_000_000.0)


def test_each_period_publishes_what_was_counted_since_the_last(metrics: FrontendMetrics) -> None:
    # given a queue's depth and counts
    depths = QueueDepths(None, None, home_region="us-east-1", max_queues=10)  # type: ignore[arg-type]
    depths.figures[(ACCOUNT, "us-east-1", "orders")] = Depth(visible=3, in_flight=2, delayed=1,
                                                             oldest_age_seconds=61.7)
    metrics.sent(ORDERS, [100, 20, 300])
    metrics.received(ORDERS, 2)
    metrics.received(ORDERS, 0)
    metrics.deleted(ORDERS, 1)
    puts = Puts()
    cloudwatch = publisher(puts, metrics, depths)
    # when a period is published
    asyncio.run(cloudwatch.publish())
    # then every SQS metric is there, in the namespace, for the queue's region
    [(region, namespace, data)] = puts.calls
    assert (region, namespace) == ("us-east-1", "AWS/SQS")
    assert values(data) == {
        "ApproximateNumberOfMessagesVisible": 3,
        "ApproximateNumberOfMessagesNotVisible": 2,
        "ApproximateNumberOfMessagesDelayed": 1,
        "ApproximateAgeOfOldestMessage": 61,
        "NumberOfMessagesSent": 3,
        "NumberOfMessagesReceived": 2,
        "NumberOfMessagesDeleted": 1,
        "NumberOfEmptyReceives": 1,
        "SentMessageSize": {"SampleCount": 3, "Sum": 420, "Minimum": 20, "Maximum": 300},
    }
    # when one more message is sent and the next period published
    metrics.sent(ORDERS, [7])
    asyncio.run(cloudwatch.publish())
    # then the counts are those of the new period only
    later = values(puts.calls[-1][2])
    assert later["NumberOfMessagesSent"] == 1 and later["NumberOfMessagesReceived"] == 0
    assert later["SentMessageSize"] == {"SampleCount": 1, "Sum": 7, "Minimum": 7, "Maximum": 7}
    # and a period with nothing sent has no size statistics
    asyncio.run(cloudwatch.publish())
    assert "SentMessageSize" not in values(puts.calls[-1][2])


def test_data_go_in_batches_of_at_most_a_thousand_per_region(metrics: FrontendMetrics) -> None:
    # given 300 queues with counts (4 data each), and one in another region
    for i in range(300):
        metrics.sent(QueueRecord(account=ACCOUNT, name=f"q{i}", queue_id=str(i), partition=0), [1])
    metrics.sent(QueueRecord(account=ACCOUNT, name="far", queue_id="far", partition=0, region="eu-north-1"), [1])
    puts = Puts()
    asyncio.run(publisher(puts, metrics).publish())
    sizes = [(region, len(data)) for region, _, data in puts.calls]
    assert all(n <= MAX_DATA_PER_CALL for _, n in sizes)
    assert sum(n for region, n in sizes if region == "us-east-1") == 300 * 5
    assert [n for region, n in sizes if region == "eu-north-1"] == [5]


def test_a_failing_period_is_logged_once_and_raises_nothing(metrics: FrontendMetrics,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    for i in range(400):
        metrics.sent(QueueRecord(account=ACCOUNT, name=f"q{i}", queue_id=str(i), partition=0), [1])
    puts = Puts(failing=True)
    with caplog.at_level(logging.WARNING, logger="ferrymq.frontend.metrics.cloudwatch"):
        asyncio.run(publisher(puts, metrics).publish())
    assert len(puts.calls) == 2
    [record] = caplog.records
    assert "2 of 2 PutMetricData calls failed" in record.getMessage()
