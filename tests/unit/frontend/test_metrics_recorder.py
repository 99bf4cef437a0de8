"""The request path's counts and their Prometheus text, read back with prometheus_client's own parser."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.errors import InvalidAction, QueueDoesNotExist, RequestThrottled, Throttling
from ferrymq.frontend.actions import ACTIONS
from ferrymq.frontend.metrics.depths import Depth, QueueDepths
from ferrymq.frontend.metrics.exposition import answer, is_metrics_request, render, snapshot
from ferrymq.frontend.metrics.recorder import FrontendMetrics, sizes_of
from ferrymq.message_size import message_bytes

ACCOUNT = "000000000000"
ORDERS = QueueRecord(account=ACCOUNT, name="orders", queue_id="q-1", partition=0)
WEST = QueueRecord(account=ACCOUNT, name="orders", queue_id="q-2", partition=0, region="us-west-1")


def samples(text: bytes) -> dict[tuple[str, frozenset], float]:
    """Every sample of a scrape by (sample name, labels)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def queue_labels(name: str = "orders", region: str = "us-east-1") -> frozenset:
    return frozenset({"queue": name, "account": ACCOUNT, "region": region}.items())


@pytest.fixture
def metrics() -> FrontendMetrics:
    return FrontendMetrics("us-east-1", ACTIONS)


def test_latency_is_counted_per_action_and_outcome(metrics: FrontendMetrics) -> None:
    # given two sends answered, one refused queue lookup and a request that was never parsed
    metrics.request("SendMessage", None, 0.0004)
    metrics.request("SendMessage", None, 0.2)
    metrics.request("GetQueueUrl", QueueDoesNotExist(), 0.001)
    metrics.request(None, ValueError("boom"), 0.003)
    # when scraped
    got = samples(render(snapshot(metrics, None)))
    # then each (action, code) has its own histogram, with cumulative buckets
    ok = {"action": "SendMessage", "code": "OK"}
    assert got[("ferrymq_request_duration_seconds_count", frozenset(ok.items()))] == 2
    assert got[("ferrymq_request_duration_seconds_bucket", frozenset({**ok, "le": "0.0005"}.items()))] == 1
    assert got[("ferrymq_request_duration_seconds_bucket", frozenset({**ok, "le": "0.25"}.items()))] == 2
    assert got[("ferrymq_request_duration_seconds_bucket", frozenset({**ok, "le": "+Inf"}.items()))] == 2
    assert got[("ferrymq_request_duration_seconds_sum", frozenset(ok.items()))] == pytest.approx(0.2004)
    missing = {"action": "GetQueueUrl", "code": QueueDoesNotExist.code}
    assert got[("ferrymq_request_duration_seconds_count", frozenset(missing.items()))] == 1
    broken = {"action": "Unknown", "code": "InternalFailure"}
    assert got[("ferrymq_request_duration_seconds_count", frozenset(broken.items()))] == 1


def test_actions_outside_the_action_table_share_one_series(metrics: FrontendMetrics) -> None:
    for name in ("Bogus1", "Bogus2", "DropTables"):
        metrics.request(name, InvalidAction(), 0.001)
    assert list(metrics.latency) == [("Unknown", InvalidAction.code)]
    assert metrics.latency[("Unknown", InvalidAction.code)].count == 3


def test_throttled_requests_are_counted_in_either_protocol(metrics: FrontendMetrics) -> None:
    metrics.request("SendMessage", Throttling(), 0.0001)
    metrics.request("SendMessage", RequestThrottled(), 0.0001)
    metrics.request("ReceiveMessage", Throttling(), 0.0001)
    metrics.request("ReceiveMessage", QueueDoesNotExist(), 0.0001)
    got = samples(render(snapshot(metrics, None)))
    assert got[("ferrymq_throttled_requests_total", frozenset({("action", "SendMessage")}))] == 2
    assert got[("ferrymq_throttled_requests_total", frozenset({("action", "ReceiveMessage")}))] == 1


def test_queue_counts_per_queue_and_region(metrics: FrontendMetrics) -> None:
    # given sends, receives (one empty) and deletes on a queue, and a send to its namesake in another region
    metrics.sent(ORDERS, [10, 300])
    metrics.sent(ORDERS, [5000])
    metrics.received(ORDERS, 2)
    metrics.received(ORDERS, 0)
    metrics.deleted(ORDERS, 2)
    metrics.deleted(ORDERS, 0)
    metrics.sent(WEST, [1])
    # when scraped
    got = samples(render(snapshot(metrics, None)))
    # then
    east = queue_labels()
    assert got[("ferrymq_queue_messages_sent_total", east)] == 3
    assert got[("ferrymq_queue_messages_received_total", east)] == 2
    assert got[("ferrymq_queue_empty_receives_total", east)] == 1
    assert got[("ferrymq_queue_messages_deleted_total", east)] == 2
    assert got[("ferrymq_queue_sent_message_size_bytes_count", east)] == 3
    assert got[("ferrymq_queue_sent_message_size_bytes_sum", east)] == 5310
    assert got[("ferrymq_queue_sent_message_size_bytes_bucket", east | {("le", "256.0")})] == 1
    assert got[("ferrymq_queue_sent_message_size_bytes_bucket", east | {("le", "1024.0")})] == 2
    assert got[("ferrymq_queue_messages_sent_total", queue_labels(region="us-west-1"))] == 1


def test_depths_are_exposed_when_known(metrics: FrontendMetrics) -> None:
    depths = QueueDepths(None, None, home_region="us-east-1", max_queues=10)  # type: ignore[arg-type]
    assert not any(name.startswith("ferrymq_queue_messages_visible") for name, _ in samples(render(
        snapshot(metrics, depths))))
    depths.figures[(ACCOUNT, "us-east-1", "orders")] = Depth(visible=4, in_flight=2, delayed=1, oldest_age_seconds=9.5)
    depths.refreshed_at = 1_700_000_000.0
    got = samples(render(snapshot(metrics, depths)))
    assert got[("ferrymq_queue_messages_visible", queue_labels())] == 4
    assert got[("ferrymq_queue_messages_in_flight", queue_labels())] == 2
    assert got[("ferrymq_queue_messages_delayed", queue_labels())] == 1
    assert got[("ferrymq_queue_oldest_message_age_seconds", queue_labels())] == 9.5
    assert got[("ferrymq_queue_depths_refreshed_timestamp_seconds", frozenset())] == 1_700_000_000.0


def test_a_scrape_is_rendered_off_the_event_loop_from_a_copy(metrics: FrontendMetrics) -> None:
    metrics.sent(ORDERS, [10])
    response = asyncio.run(answer(metrics, None))
    assert response.status == 200
    assert dict(response.headers)["Content-Type"].startswith("text/plain; version=0.0.4")
    assert samples(response.body)[("ferrymq_queue_messages_sent_total", queue_labels())] == 1


@pytest.mark.parametrize(
    ("body", "attributes"),
    [
        ("plain ascii", {}),
        ("déjà vu ✓", {}),
        ("x", {"n": {"DataType": "Number", "StringValue": "42"}, "b": {"DataType": "Binary", "BinaryValue": b"\0\1"}}),
    ],
)
def test_sizes_are_counted_as_sqs_counts_them(body: str, attributes: dict) -> None:
    assert sizes_of([{"body": body, "attrs": attributes}]) == [message_bytes(body, attributes)]


def test_counters_of_queues_gone_from_the_catalog_are_forgotten_once_idle(metrics: FrontendMetrics) -> None:
    # given a listed queue, a deleted one and one created after the listing, all with counts
    listed, deleted, new = (QueueRecord(account=ACCOUNT, name=n, queue_id=n, partition=0) for n in "abc")
    for queue in (listed, deleted, new):
        metrics.sent(queue, [1])
    live = {(ACCOUNT, "us-east-1", "a")}
    # when the unlisted ones are looked at twice, the new one busy in between
    activity = metrics.forget_idle(live, {})
    metrics.received(new, 1)
    metrics.forget_idle(live, activity)
    # then only the idle, unlisted one is gone
    assert {key[2] for key in metrics.queues} == {"a", "c"}


def test_only_unsigned_gets_of_the_path_are_scrapes() -> None:
    assert is_metrics_request("GET", "/metrics", "", {})
    assert not is_metrics_request("GET", "/metrics", "Action=ListQueues", {})
    assert not is_metrics_request("GET", "/metrics", "", {"authorization": "AWS4-HMAC-SHA256 ..."})
    assert not is_metrics_request("POST", "/metrics", "", {})
    assert not is_metrics_request("GET", "/metrics/", "", {})
