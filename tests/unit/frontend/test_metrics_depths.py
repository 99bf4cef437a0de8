"""Queue depths refreshed from a catalog and the workers' answers (both in memory here): shards add up, the
cost of one refresh is capped, and queues that left the catalog lose their figures."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ferrymq.aws.queue_store import QueueRecord, Shard
from ferrymq.errors import ServiceUnavailable
from ferrymq.frontend.metrics.depths import Depth, QueueDepths

ACCOUNT = "000000000000"


class Catalog:
    """Pages of at most ``limit`` queues; the start key is the position reached."""

    def __init__(self, names: list[str]) -> None:
        self.queues = [QueueRecord(account=ACCOUNT, name=n, queue_id=f"id-{n}", partition=0) for n in names]
        self.reads = 0

    async def scan(self, limit: int, start: Any) -> tuple[list[QueueRecord], Any]:
        self.reads += 1
        position = start or 0
        page = self.queues[position:position + limit]
        end = position + len(page)
        return page, (end if end < len(self.queues) else None)


class Workers:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.down: set[str] = set()
        self.answers: dict[str, list[Mapping[str, int]]] = {}

    async def shard_depths(self, queue: QueueRecord) -> list[Mapping[str, int]]:
        self.asked.append(queue.name)
        if queue.name in self.down:
            raise ServiceUnavailable()
        return self.answers.get(queue.name, [{"visible": 1, "in_flight": 0, "delayed": 0, "oldest_age_ms": 0}])


def depths_of(catalog: Catalog, workers: Workers, max_queues: int = 100) -> QueueDepths:
    return QueueDepths(catalog.scan, workers.shard_depths, home_region="us-east-1", max_queues=max_queues,
                       wall=lambda: 1_700_000_000.0)


def test_a_sharded_queue_is_one_queue_whose_shards_add_up() -> None:
    # given a queue of three shards
    catalog, workers = Catalog([]), Workers()
    catalog.queues = [QueueRecord(account=ACCOUNT, name="wide", queue_id="w", partition=0,
                                  more_shards=(Shard(1), Shard(2)))]
    workers.answers["wide"] = [
        {"visible": 3, "in_flight": 1, "delayed": 0, "oldest_age_ms": 4_000},
        {"visible": 0, "in_flight": 2, "delayed": 5, "oldest_age_ms": 90_500},
        {"visible": 7, "in_flight": 0, "delayed": 0, "oldest_age_ms": 0},
    ]
    depths = depths_of(catalog, workers)
    # when refreshed
    asyncio.run(depths.refresh())
    # then its depth is the sum, and its oldest message the oldest of any shard
    assert depths.figures == {(ACCOUNT, "us-east-1", "wide"): Depth(10, 3, 5, 90.5)}
    assert depths.refreshed_at == 1_700_000_000.0


def test_one_refresh_asks_about_at_most_the_cap_and_the_next_goes_on_from_there() -> None:
    # given five queues and a cap of two per refresh
    catalog, workers = Catalog(list("abcde")), Workers()
    depths = depths_of(catalog, workers, max_queues=2)
    # when refreshed three times
    for expected in (["a", "b"], ["c", "d"], ["e"]):
        workers.asked = []
        asyncio.run(depths.refresh())
        # then each asks about the next two at most
        assert sorted(workers.asked) == expected
    # and after the third the whole catalog has been seen once
    assert depths.passes == 1
    assert depths.listed == {(ACCOUNT, "us-east-1", n) for n in "abcde"}
    # and the fourth starts over
    workers.asked = []
    asyncio.run(depths.refresh())
    assert sorted(workers.asked) == ["a", "b"]


def test_queues_gone_from_the_catalog_lose_their_figures_after_a_whole_pass() -> None:
    catalog, workers = Catalog(["a", "b"]), Workers()
    depths = depths_of(catalog, workers)
    asyncio.run(depths.refresh())
    assert {k[2] for k in depths.figures} == {"a", "b"}
    # when b is deleted
    catalog.queues = catalog.queues[:1]
    asyncio.run(depths.refresh())
    # then its figures are gone
    assert {k[2] for k in depths.figures} == {"a"}


def test_a_queue_whose_workers_do_not_answer_keeps_its_last_figures() -> None:
    catalog, workers = Catalog(["a", "b"]), Workers()
    depths = depths_of(catalog, workers)
    asyncio.run(depths.refresh())
    before = dict(depths.figures)
    # when a's workers are down and b's answer differently
    workers.down = {"a"}
    workers.answers["b"] = [{"visible": 9, "in_flight": 0, "delayed": 0, "oldest_age_ms": 1000}]
    asyncio.run(depths.refresh())
    # then a keeps what it had, b is refreshed, and neither is dropped
    assert depths.figures[(ACCOUNT, "us-east-1", "a")] == before[(ACCOUNT, "us-east-1", "a")]
    assert depths.figures[(ACCOUNT, "us-east-1", "b")] == Depth(9, 0, 0, 1.0)
