"""Token buckets and the request throttle, on a clock moved by hand."""

from __future__ import annotations

from typing import Any

import pytest

from ferrymq.clock import ManualClock
from ferrymq.errors import RequestThrottled, Throttling
from ferrymq.frontend.throttle import (
    Limit,
    RequestThrottle,
    Throttle,
    TokenBucket,
    build_request_throttle,
    throttled,
)
from ferrymq.protocol.responses import render_error
from ferrymq.settings import Settings

ACCOUNT = "111111111111"
OFF = {"throttle_account_rate": 0.0, "throttle_action_rate": 0.0, "throttle_queue_rate": 0.0,
       "throttle_fifo_rate": 0.0, "throttle_fifo_high_throughput_rate": 0.0}


def _throttle(clock: ManualClock, **limits: Any) -> Throttle:
    return Throttle(Settings(**{**OFF, **limits}), clock)


def _admitted(throttle: Throttle, n: int, *args: Any) -> int:
    return sum(throttle.admit(*args) for _ in range(n))


# --- the bucket ----------------------------------------------------------------------------------------


def test_a_bucket_lets_its_capacity_through_then_refills_at_its_rate() -> None:
    bucket = TokenBucket(rate=10.0, capacity=5.0, now=0.0)
    assert [bucket.take(0.0) for _ in range(6)] == [True] * 5 + [False]
    # a tenth of a second brings one token back, and never more than the capacity
    assert bucket.take(0.1) and not bucket.take(0.1)
    assert bucket.refill(100.0) == 5.0


def test_a_bucket_ignores_a_clock_that_did_not_move() -> None:
    bucket = TokenBucket(rate=1.0, capacity=1.0, now=10.0)
    assert bucket.take(10.0)
    assert not bucket.take(9.0)
    assert bucket.refill(10.5) == pytest.approx(0.5)


def test_a_limit_is_shared_equally_by_the_front_ends_and_keeps_at_least_one_token() -> None:
    settings = Settings(throttle_frontends=4, throttle_burst_seconds=2.0)
    assert Limit.of(300.0, settings) == Limit(75.0, 150.0)
    assert Limit.of(2.0, settings) == Limit(0.5, 1.0)
    assert Limit.of(0.0, settings) is None


# --- the throttle ---------------------------------------------------------------------------------------


def test_an_account_over_its_rate_is_refused_while_another_account_is_not() -> None:
    clock = ManualClock()
    throttle = _throttle(clock, throttle_account_rate=5.0)
    assert _admitted(throttle, 10, ACCOUNT, "SendMessage") == 5
    assert throttle.admit("222222222222", "SendMessage")
    clock.advance(1.0)
    assert _admitted(throttle, 10, ACCOUNT, "SendMessage") == 5


def test_each_action_of_an_account_has_a_bucket_of_its_own() -> None:
    throttle = _throttle(ManualClock(), throttle_action_rate=3.0)
    assert _admitted(throttle, 5, ACCOUNT, "SendMessage") == 3
    assert _admitted(throttle, 5, ACCOUNT, "ReceiveMessage") == 3


def test_each_queue_has_a_bucket_of_its_own() -> None:
    throttle = _throttle(ManualClock(), throttle_queue_rate=2.0)
    one, two = (ACCOUNT, "us-east-1", "one"), (ACCOUNT, "us-east-1", "two")
    assert _admitted(throttle, 4, ACCOUNT, "SendMessage", one) == 2
    assert _admitted(throttle, 4, ACCOUNT, "DeleteMessage", one) == 0
    assert _admitted(throttle, 4, ACCOUNT, "SendMessage", two) == 2


def test_a_refused_request_takes_no_token_from_the_buckets_that_had_room() -> None:
    # given a queue bucket of 2 and an account bucket of 4
    throttle = _throttle(ManualClock(), throttle_account_rate=4.0, throttle_queue_rate=2.0)
    queue = (ACCOUNT, "us-east-1", "q")
    assert _admitted(throttle, 5, ACCOUNT, "SendMessage", queue) == 2
    # then the three refusals left the account's two remaining tokens for other queues
    assert _admitted(throttle, 5, ACCOUNT, "SendMessage", (ACCOUNT, "us-east-1", "other")) == 2


def test_a_fifo_queue_gets_sqs_quota_per_message_action_unless_in_high_throughput_mode() -> None:
    clock = ManualClock()
    throttle = _throttle(clock, throttle_fifo_rate=300.0, throttle_fifo_high_throughput_rate=3000.0)
    queue = (ACCOUNT, "us-east-1", "q.fifo")
    # 300 calls per second per action, each action apart
    assert _admitted(throttle, 400, ACCOUNT, "SendMessage", queue, False) == 300
    assert _admitted(throttle, 400, ACCOUNT, "SendMessageBatch", queue, False) == 300
    assert _admitted(throttle, 400, ACCOUNT, "ReceiveMessage", queue, False) == 300
    # actions that move no messages are not metered by the FIFO quota
    assert _admitted(throttle, 400, ACCOUNT, "GetQueueAttributes", queue, False) == 400
    # a queue in high-throughput mode has the higher quota, and an unknown mode none
    assert _admitted(throttle, 4000, ACCOUNT, "DeleteMessage", queue, True) == 3000
    assert _admitted(throttle, 4000, ACCOUNT, "ChangeMessageVisibility", queue, None) == 4000
    clock.advance(0.5)
    assert _admitted(throttle, 400, ACCOUNT, "SendMessage", queue, False) == 150


def test_idle_buckets_are_forgotten_when_there_are_too_many() -> None:
    clock = ManualClock()
    throttle = Throttle(Settings(**{**OFF, "throttle_account_rate": 1.0}), clock, max_buckets=3)
    for account in ("a", "b", "c"):
        assert throttle.admit(account, "SendMessage")
    assert not throttle.admit("a", "SendMessage")
    # given every bucket is in use, a new key starts the table afresh rather than growing it
    assert throttle.admit("d", "SendMessage")
    assert len(throttle) == 1
    # given they have refilled, the idle ones are dropped and busy ones kept
    clock.advance(2.0)
    for account in ("e", "f"):
        assert throttle.admit(account, "SendMessage")
    assert throttle.admit("g", "SendMessage")
    assert len(throttle) <= 3
    assert not throttle.admit("g", "SendMessage")


# --- the pipeline's view ----------------------------------------------------------------------------------


class _Record:
    def __init__(self, attributes: dict[str, str]) -> None:
        self.attributes = attributes


class _Catalog:
    """Only the cache: the throttle must never look a queue up."""

    def __init__(self, cached: dict[tuple[str, str, str], _Record]) -> None:
        self._cached = cached
        self.asked: list[tuple[str, str, str | None]] = []

    def cached(self, account: str, name: str, region: str | None = None) -> _Record | None:
        self.asked.append((account, name, region))
        return self._cached.get((account, name, region or "us-east-1"))


def _request_throttle(catalog: _Catalog, **limits: Any) -> RequestThrottle:
    return RequestThrottle(Throttle(Settings(**{**OFF, **limits}), ManualClock()), catalog, "us-east-1")  # type: ignore[arg-type]


def _check(throttle: RequestThrottle, url: str | None, protocol: str = "json", action: str = "SendMessage") -> bool:
    try:
        throttle.check(protocol, ACCOUNT, "us-east-1", action, {"QueueUrl": url} if url else {}, None)
    except (Throttling, RequestThrottled):
        return False
    return True


def test_queue_urls_of_any_form_count_against_the_same_queue() -> None:
    throttle = _request_throttle(_Catalog({}), throttle_queue_rate=2.0)
    urls = [
        f"http://127.0.0.1:9324/{ACCOUNT}/q",
        f"http://127.0.0.1:9324/queue/us-east-1/{ACCOUNT}/q",
        f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/q",
    ]
    assert [_check(throttle, url) for url in urls] == [True, True, False]


def test_a_bad_queue_url_is_left_to_the_action_to_refuse() -> None:
    throttle = _request_throttle(_Catalog({}), throttle_queue_rate=1.0)
    assert all(_check(throttle, "http://h/not-a-queue") for _ in range(3))


def test_the_fifo_mode_comes_from_the_cached_record_only() -> None:
    high = {"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId", "FifoQueue": "true"}
    catalog = _Catalog({
        (ACCOUNT, "plain.fifo", "us-east-1"): _Record({"FifoQueue": "true"}),
        (ACCOUNT, "fast.fifo", "us-east-1"): _Record(high),
    })
    throttle = _request_throttle(catalog, throttle_fifo_rate=2.0, throttle_fifo_high_throughput_rate=4.0)
    base = f"http://127.0.0.1:9324/{ACCOUNT}"
    assert sum(_check(throttle, f"{base}/plain.fifo") for _ in range(5)) == 2
    assert sum(_check(throttle, f"{base}/fast.fifo") for _ in range(5)) == 4
    assert sum(_check(throttle, f"{base}/uncached.fifo") for _ in range(5)) == 5
    assert sum(_check(throttle, f"{base}/standard") for _ in range(5)) == 5
    assert {name for _, name, _ in catalog.asked} == {"plain.fifo", "fast.fifo", "uncached.fifo"}


def test_the_refusal_is_sqs_throttling_error_of_the_request_protocol() -> None:
    throttle = _request_throttle(_Catalog({}), throttle_account_rate=1.0)
    throttle.check("query", ACCOUNT, None, "ListQueues", {}, None)
    with pytest.raises(RequestThrottled):
        throttle.check("query", ACCOUNT, None, "ListQueues", {}, None)
    with pytest.raises(Throttling):
        throttle.check("json", ACCOUNT, None, "ListQueues", {}, None)


def test_throttling_errors_render_as_sqs_sends_them() -> None:
    query = render_error("query", throttled("query"), "rid")
    assert query.status == 403
    assert b"<Type>Sender</Type><Code>RequestThrottled</Code><Message>Request is throttled.</Message>" in query.body
    json_error = render_error("json", throttled("json"), "rid")
    assert json_error.status == 400
    assert b'"__type":"com.amazon.coral.service#ThrottlingException"' in json_error.body
    assert ("x-amzn-query-error", "Throttling;Sender") in json_error.headers


def test_throttling_can_be_turned_off() -> None:
    catalog = _Catalog({})
    assert build_request_throttle(Settings(throttle_enabled=False), ManualClock(), catalog) is None  # type: ignore[arg-type]
    assert build_request_throttle(Settings(), ManualClock(), catalog) is not None  # type: ignore[arg-type]


def test_settings_read_the_limits_from_the_environment() -> None:
    settings = Settings.from_env({"FERRYMQ_THROTTLE_ACCOUNT_RATE": "7", "FERRYMQ_THROTTLE_FIFO_RATE": "30",
                                  "FERRYMQ_THROTTLE_FRONTENDS": "3", "FERRYMQ_THROTTLE_ENABLED": "off"})
    assert (settings.throttle_account_rate, settings.throttle_fifo_rate) == (7.0, 30.0)
    assert settings.throttle_frontends == 3 and not settings.throttle_enabled
    assert Settings.from_env({}).throttle_fifo_rate == 300.0
