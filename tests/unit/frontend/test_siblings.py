"""Gateway processes sharing one port tell each other their counts through files: what a scrape, the dashboard's
rates and its recent errors add up, which siblings count as live, and what a file that is not one does."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from ferrymq.clock import ManualClock
from ferrymq.errors import QueueDoesNotExist, Throttling
from ferrymq.frontend.actions import ACTIONS
from ferrymq.frontend.dashboard.errors import RecentErrors
from ferrymq.frontend.dashboard.history import QueueHistory
from ferrymq.frontend.metrics.depths import Depth, QueueDepths
from ferrymq.frontend.metrics.exposition import answer, snapshot
from ferrymq.frontend.metrics.recorder import FrontendMetrics
from ferrymq.frontend.metrics.service import GatewayMetrics
from ferrymq.frontend.siblings import FORGOTTEN_SECONDS, STALE_PERIODS, Counts, Siblings, counts_of
from ferrymq.frontend.wiring import build_siblings
from ferrymq.settings import Settings
from tests.unit.frontend.test_metrics_recorder import ORDERS, WEST, queue_labels, samples

NOW = 1_800_000_000.0


class Gateway:
    """One gateway process's counting parts, and what it shares through ``directory``."""

    def __init__(self, directory: Path, me: str, wall: ManualClock | None = None) -> None:
        self.metrics = FrontendMetrics("us-east-1", ACTIONS)
        self.errors = RecentErrors()
        self.siblings = Siblings(directory, lambda: counts_of(self.metrics, self.errors),
                                 lambda: self.metrics.answered + self.errors.added, period=2.0,
                                 wall=(wall or ManualClock(NOW)).now, me=me)


def _touch(path: Path, at: float) -> None:
    os.utime(path, (at, at))


def test_a_scrape_of_one_process_adds_its_siblings_counts_to_its_own(tmp_path: Path) -> None:
    # given two gateways of one port, each having answered its own requests
    one, two = Gateway(tmp_path, "1"), Gateway(tmp_path, "2")
    one.metrics.request("SendMessage", None, 0.0004)
    one.metrics.sent(ORDERS, [100, 300])
    two.metrics.request("SendMessage", None, 0.2)
    two.metrics.request("SendMessage", Throttling(), 0.001)
    two.metrics.sent(ORDERS, [5000])
    two.metrics.received(WEST, 3)
    for gateway in (one, two):
        gateway.siblings.publish()
    # when the first is scraped, its files' times being those of now
    for name in ("1", "2"):
        _touch(tmp_path / f"{name}.counters", NOW)
    got = samples(asyncio.run(answer(one.metrics, None, one.siblings.others)).body)
    # then the port's counts are the sums: histograms bucket by bucket, counters, and queues either one knows
    ok = frozenset({"action": "SendMessage", "code": "OK"}.items())
    assert got[("ferrymq_request_duration_seconds_count", ok)] == 2
    assert got[("ferrymq_request_duration_seconds_sum", ok)] == pytest.approx(0.2004)
    assert got[("ferrymq_request_duration_seconds_bucket", frozenset({*ok, ("le", "0.0005")}))] == 1
    assert got[("ferrymq_throttled_requests_total", frozenset({"action": "SendMessage"}.items()))] == 1
    assert got[("ferrymq_queue_messages_sent_total", queue_labels())] == 3
    assert got[("ferrymq_queue_sent_message_size_bytes_sum", queue_labels())] == 5400
    assert got[("ferrymq_queue_messages_received_total", queue_labels(region="us-west-1"))] == 3
    # and its own process's counts are unchanged by the adding
    assert one.metrics.queues[(ORDERS.account, "us-east-1", "orders")].sent == 2


def test_the_counts_survive_their_file_exactly(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path, "1")
    gateway.metrics.request("GetQueueUrl", QueueDoesNotExist(), 0.01)
    gateway.metrics.sent(ORDERS, [10])
    gateway.errors.add(NOW, "111122223333", "GetQueueUrl", QueueDoesNotExist(), "req-1")
    taken = counts_of(gateway.metrics, gateway.errors)
    assert Counts.decode(taken.encode()) == taken


def test_a_sibling_whose_file_went_stale_is_left_out_and_a_long_forgotten_one_removed(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    reader, live, stale, gone = (Gateway(tmp_path, name, clock) for name in ("r", "live", "stale", "gone"))
    for gateway in (live, stale, gone):
        gateway.metrics.sent(ORDERS, [1])
        gateway.metrics.request("SendMessage", None, 0.001)
        gateway.siblings.publish()
    _touch(tmp_path / "live.counters", NOW - 2.0)
    _touch(tmp_path / "stale.counters", NOW - STALE_PERIODS * 2.0 - 0.5)
    _touch(tmp_path / "gone.counters", NOW - FORGOTTEN_SECONDS - 1)
    (tmp_path / "torn.tmp").write_bytes(b'{"latency"')  # a process that died halfway through a write
    _touch(tmp_path / "torn.tmp", NOW - FORGOTTEN_SECONDS - 1)
    (tmp_path / "writing.tmp").write_bytes(b'{"latency"')  # one writing now
    _touch(tmp_path / "writing.tmp", NOW)
    others = reader.siblings.others()
    assert [c.queues[(ORDERS.account, "us-east-1", "orders")][0][0] for c in others] == [1]
    assert (tmp_path / "stale.counters").exists() and not (tmp_path / "gone.counters").exists()
    assert (tmp_path / "writing.tmp").exists() and not (tmp_path / "torn.tmp").exists()


def test_an_idle_process_only_touches_its_file_and_its_stop_removes_it(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path, "1")
    gateway.metrics.request("SendMessage", None, 0.001)
    gateway.siblings.publish()
    path = tmp_path / "1.counters"
    written = path.read_bytes()
    _touch(path, NOW - 100)
    # when nothing was counted since, then the file is touched, not written
    path.write_bytes(written + b" ")  # a rewrite would drop the extra byte
    _touch(path, NOW - 100)
    gateway.siblings.publish()
    assert path.read_bytes() == written + b" " and path.stat().st_mtime > NOW - 100
    # when a request was counted since, then it is written again
    gateway.metrics.request("SendMessage", None, 0.001)
    gateway.siblings.publish()
    assert sum(Counts.decode(path.read_bytes()).latency[("SendMessage", "OK")][0]) == 2
    asyncio.run(gateway.siblings.close())
    assert not path.exists()


@pytest.mark.parametrize("content", [b"", b"not json", b"[]", b'{"latency": 3}', b'{"latency": [[1]]}',
                                     b"\xff\xfe" * 100])
def test_a_file_that_is_no_siblings_counts_is_skipped_and_named(tmp_path: Path, content: bytes,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    # given a sibling's counts and, beside them, a file of the same kind holding anything else
    clock = ManualClock(NOW)
    reader, sibling = Gateway(tmp_path, "r", clock), Gateway(tmp_path, "s", clock)
    sibling.metrics.sent(ORDERS, [1])
    sibling.metrics.request("SendMessage", None, 0.001)
    sibling.siblings.publish()
    (tmp_path / "x.counters").write_bytes(content)
    for name in ("s", "x"):
        _touch(tmp_path / f"{name}.counters", NOW)
    # when read, then the sibling's counts come back, and the other file is named in the log
    with caplog.at_level(logging.WARNING):
        assert len(reader.siblings.others()) == 1
    assert "x.counters" in caplog.text


def test_the_dashboard_s_rates_and_recent_errors_take_in_the_siblings(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    one, two = Gateway(tmp_path, "1", clock), Gateway(tmp_path, "2", clock)
    history = QueueHistory(one.metrics, None, period=2.0, keep_seconds=6.0, wall=clock.now, siblings=one.siblings)
    history.sample([])
    one.metrics.sent(ORDERS, [1] * 4)
    two.metrics.sent(ORDERS, [1] * 6)
    two.metrics.request("SendMessage", None, 0.001)
    two.errors.add(NOW + 1, ORDERS.account, "GetQueueUrl", QueueDoesNotExist(), "from-two")
    one.errors.add(NOW, ORDERS.account, "GetQueueUrl", QueueDoesNotExist(), "from-one")
    two.siblings.publish()
    clock.advance(2.0)
    _touch(tmp_path / "2.counters", clock.now())
    history.sample(one.siblings.others())
    key = (ORDERS.account, "us-east-1", "orders")
    assert history.of(key)[-1].sent_per_second == pytest.approx(5.0)
    others = [e for counts in one.siblings.others() for e in counts.errors]
    assert [e.request_id for e in one.errors.latest(None, 10, others)] == ["from-two", "from-one"]
    assert one.errors.latest("999999999999", 10, others) == []


def test_a_gateway_alone_on_its_port_shares_nothing(tmp_path: Path) -> None:
    metrics = FrontendMetrics("us-east-1", ACTIONS)
    metrics.sent(ORDERS, [7])
    assert snapshot(metrics, None).counts == counts_of(metrics)
    built = GatewayMetrics(metrics, None, None, expose=True, collect_seconds=0.0, publish_seconds=0.0)
    alone = Settings(data_dir=tmp_path, gateway_processes=1)
    assert build_siblings(alone, lambda: built, RecentErrors()) is None
    shared = build_siblings(Settings(data_dir=tmp_path, gateway_processes=2), lambda: built, RecentErrors())
    assert shared is not None
    shared.publish()
    assert [p.name for p in (tmp_path / "gateways").iterdir()] == [f"{os.getpid()}.counters"]


class _Collected(QueueDepths):
    """A depth collector's figures as one refresh left them (no catalog, no workers)."""

    def __init__(self, figures: dict, at: float) -> None:
        super().__init__(None, None, home_region="us-east-1", max_queues=1)  # type: ignore[arg-type]
        self.figures, self.refreshed_at = figures, at


def test_the_depths_one_process_collects_are_shown_by_the_others_and_the_newest_win(tmp_path: Path) -> None:
    # given the port's collector, which wrote its depths, and a process that collects none
    clock = ManualClock(NOW)
    key = (ORDERS.account, "us-east-1", "orders")
    collector, other = Gateway(tmp_path, "collector", clock), Gateway(tmp_path, "other", clock)
    collected = _Collected({key: Depth(7, 2, 1, 30.0)}, NOW - 1)
    collector.siblings = Siblings(tmp_path, lambda: counts_of(collector.metrics, None, collected), lambda: 1,
                                  period=2.0, wall=clock.now, me="collector")
    collector.siblings.publish()
    # when the other is scraped, then it shows the collector's depths and when they were refreshed
    got = samples(asyncio.run(answer(other.metrics, None, other.siblings.others)).body)
    assert got[("ferrymq_queue_messages_visible", queue_labels())] == 7
    assert got[("ferrymq_queue_messages_in_flight", queue_labels())] == 2
    assert got[("ferrymq_queue_depths_refreshed_timestamp_seconds", frozenset())] == NOW - 1
    # and its chart's history samples them too
    history = QueueHistory(other.metrics, None, period=2.0, wall=clock.now, siblings=other.siblings)
    history.sample(other.siblings.others())
    assert history.of(key)[-1].visible == 7
    # and a process's own depths, newer than a sibling's, are the ones shown
    own = _Collected({key: Depth(9, 0, 0, 1.0)}, NOW)
    got = samples(asyncio.run(answer(other.metrics, own, other.siblings.others)).body)
    assert got[("ferrymq_queue_messages_visible", queue_labels())] == 9


def test_a_process_that_collects_no_depths_forgets_the_queues_its_collector_no_longer_lists(tmp_path: Path) -> None:
    # given a process whose counters know two queues, and the port's collector, which lists only one of them
    clock = ManualClock(NOW)
    listed = (ORDERS.account, "us-east-1", "orders")
    collected = _Collected({listed: Depth(0, 0, 0, 0.0)}, NOW)
    Siblings(tmp_path, lambda: counts_of(None, None, collected), lambda: 1, period=2.0, wall=clock.now,
             me="collector").publish()
    other = Gateway(tmp_path, "other", clock)
    other.metrics.sent(ORDERS, [1])
    other.metrics.sent(WEST, [1])
    built = GatewayMetrics(other.metrics, None, None, expose=True, collect_seconds=0.0, publish_seconds=0.0,
                           siblings=other.siblings)
    # when it forgets idle queues twice (a queue must be idle between two looks to go)
    for _ in range(2):
        asyncio.run(built._forget_idle())
    # then the queue the collector no longer lists is forgotten, the other kept
    assert set(other.metrics.queues) == {listed}
