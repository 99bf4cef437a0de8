"""The pending-drop sweeper against a catalog and an engine played by the test."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from ferrymq.aws.queue_store import PendingDrop
from ferrymq.errors import ServiceUnavailable
from ferrymq.storage.drops import PendingDropSweeper

PARTITION = 3


def _drop(queue_id: str) -> PendingDrop:
    return PendingDrop(PARTITION, queue_id, "123456789012", f"queue-{queue_id}", 1_700_000_000.0)


class _Catalog:
    """Pending drops kept in a dict; reads and clears can be made to fail, and every call is written down."""

    def __init__(self, drops: list[PendingDrop], events: list[tuple[str, ...]]) -> None:
        self.items = {d.queue_id: d for d in drops}
        self.events = events
        self.read_failures: list[Exception] = []
        self.clear_failures: dict[str, Exception] = {}
        self.reads = 0
        self.read_again = threading.Event()

    def pending_drops(self, partition: int) -> list[PendingDrop]:
        assert partition == PARTITION
        self.reads += 1
        if self.reads > 1:
            self.read_again.set()
        if self.read_failures:
            raise self.read_failures.pop(0)
        return sorted(self.items.values(), key=lambda d: d.queue_id)

    def clear_pending_drop(self, partition: int, queue_id: str) -> None:
        assert partition == PARTITION
        failure = self.clear_failures.pop(queue_id, None)
        if failure is not None:
            raise failure
        self.events.append(("clear", queue_id))
        self.items.pop(queue_id, None)


class _Engine:
    """The two engine calls the sweeper makes: drop an id, and wait until what was appended is durable."""

    def __init__(self, events: list[tuple[str, ...]]) -> None:
        self.events = events
        self.queues = {"q1", "q2", "live"}
        self.durable_failure: Exception | None = None

    def drop_queue(self, queue_id: str) -> None:
        self.events.append(("drop", queue_id))
        self.queues.discard(queue_id)

    async def wait_durable(self) -> None:
        if self.durable_failure is not None:
            raise self.durable_failure
        self.events.append(("durable",))


def _sweeper(drops: list[PendingDrop]) -> tuple[PendingDropSweeper, _Catalog, _Engine, list[tuple[str, ...]]]:
    events: list[tuple[str, ...]] = []
    catalog, engine = _Catalog(drops, events), _Engine(events)
    return PendingDropSweeper(PARTITION, catalog, engine.drop_queue, engine.wait_durable), catalog, engine, events


def test_a_sweep_drops_every_pending_id_and_clears_it_only_once_durable() -> None:
    # given two pending drops of the partition
    sweeper, catalog, engine, events = _sweeper([_drop("q1"), _drop("q2")])
    # when the sweeper runs once
    carried_out = asyncio.run(sweeper.sweep_once())
    # then both ids are dropped, their records made durable, and only then are the items cleared
    assert carried_out == 2
    assert events == [("drop", "q1"), ("drop", "q2"), ("durable",), ("clear", "q1"), ("clear", "q2")]
    assert engine.queues == {"live"}
    assert catalog.items == {}


def test_a_sweep_with_nothing_pending_touches_nothing() -> None:
    # given no pending drops
    sweeper, _, engine, events = _sweeper([])
    # when the sweeper runs, then it neither drops nor waits for the log
    assert asyncio.run(sweeper.sweep_once()) == 0
    assert events == []
    assert engine.queues == {"q1", "q2", "live"}


def test_an_id_the_engine_no_longer_has_is_still_cleared() -> None:
    # given a pending drop whose queue the worker has dropped already (the front end told it, then failed to clear)
    sweeper, catalog, _, events = _sweeper([_drop("gone")])
    # when the sweeper runs, then dropping again is harmless and the item goes
    assert asyncio.run(sweeper.sweep_once()) == 1
    assert events == [("drop", "gone"), ("durable",), ("clear", "gone")]
    assert catalog.items == {}


def test_nothing_is_cleared_when_the_log_does_not_become_durable() -> None:
    # given a log that fails before the drop records reach the disk
    sweeper, catalog, engine, events = _sweeper([_drop("q1")])
    engine.durable_failure = OSError("disk gone")
    # when the sweeper runs, then it fails and the item stays for a sweep after recovery
    with pytest.raises(OSError):
        asyncio.run(sweeper.sweep_once())
    assert ("clear", "q1") not in events
    assert set(catalog.items) == {"q1"}


def test_an_item_left_by_a_failed_clear_is_carried_out_again_next_sweep() -> None:
    # given two pending drops, and a catalog outage while the second is cleared
    sweeper, catalog, _, events = _sweeper([_drop("q1"), _drop("q2")])
    catalog.clear_failures["q2"] = ServiceUnavailable()
    # when the sweeper runs, then the outage surfaces with q1 cleared and q2 left
    with pytest.raises(ServiceUnavailable):
        asyncio.run(sweeper.sweep_once())
    assert set(catalog.items) == {"q2"}
    # when it runs again, then q2 is dropped again (harmless) and cleared
    events.clear()
    assert asyncio.run(sweeper.sweep_once()) == 1
    assert events == [("drop", "q2"), ("durable",), ("clear", "q2")]
    assert catalog.items == {}


def test_run_outlives_outages_and_reports_each_outage_once(caplog: pytest.LogCaptureFixture) -> None:
    # given a catalog that is unreachable for two sweeps, then fails unexpectedly once, then answers
    sweeper, catalog, engine, _ = _sweeper([_drop("q1")])
    catalog.read_failures = [ServiceUnavailable(), ServiceUnavailable(), RuntimeError("bug")]

    async def scenario() -> None:
        task = asyncio.create_task(sweeper.run(0))
        try:
            # when the loop runs until the item is cleared and the catalog is read once more after that
            for _ in range(100):
                if not catalog.items and catalog.reads >= 5:
                    break
                await asyncio.to_thread(catalog.read_again.wait, 10)
                catalog.read_again.clear()
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    with caplog.at_level(logging.INFO, logger="ferrymq.storage.drops"):
        asyncio.run(scenario())
    # then the drop was carried out despite the failures before it, and the loop kept going after it
    assert "q1" not in engine.queues
    assert catalog.items == {}
    assert catalog.reads >= 5
    # and the outage was reported once, its end once, and the unexpected failure with its traceback
    messages = [r.getMessage() for r in caplog.records]
    assert sum("cannot be read or cleared" in m for m in messages) == 1
    assert sum("reachable again" in m for m in messages) == 1
    unexpected = [r for r in caplog.records if "failed; retrying" in r.getMessage()]
    assert len(unexpected) == 1 and unexpected[0].exc_info is not None
