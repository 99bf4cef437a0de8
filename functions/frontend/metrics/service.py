"""The gateway's metrics put together: the recorder the request path feeds, the queue depths, ``/metrics``,
the CloudWatch publisher, and the background tasks that refresh and publish.

The tasks run only where :meth:`GatewayMetrics.start` is called: the local gateway's ASGI lifespan. The
Lambda entry never starts them (a frozen execution environment runs nothing between invocations). A task's
failure is logged, once per period, and the task goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.aws.session import client
from ferrymq.frontend.dispatch import Dispatcher
from ferrymq.frontend.metrics import exposition
from ferrymq.frontend.metrics.cloudwatch import CloudWatchPublisher, boto3_put
from ferrymq.frontend.metrics.depths import QueueDepths
from ferrymq.frontend.metrics.recorder import FrontendMetrics, QueueKey
from ferrymq.frontend.siblings import Counts, Siblings, newest_depths
from ferrymq.metadata import queue_attributes
from ferrymq.metadata.catalog import QueueCatalog
from ferrymq.periodic import Periodic
from ferrymq.protocol.responses import HttpResponse
from ferrymq.settings import Settings

log = logging.getLogger(__name__)

SIBLINGS_FORGET_SECONDS = 60.0
"""How often a process that collects no depths forgets the counters of queues its port's collector no longer
lists (when no CloudWatch publishing does it after each period)."""
FINAL_PUBLISH_SECONDS = 5.0
"""How long closing waits for the last period's CloudWatch data to go out."""


class GatewayMetrics:
    def __init__(self, recorder: FrontendMetrics, depths: QueueDepths | None, publisher: CloudWatchPublisher | None,
                 *, expose: bool, collect_seconds: float, publish_seconds: float,
                 siblings: Siblings | None = None) -> None:
        self.recorder = recorder
        self.siblings = siblings
        self.depths = depths
        self.publisher = publisher
        self._expose = expose
        self._collect_seconds = collect_seconds
        self._publish_seconds = publish_seconds
        self._periodic: list[Periodic] = []
        self._activity: dict[QueueKey, int] = {}
        self._passes_seen = 0

    def serves(self, method: str, path: str, query_string: str, headers: dict[str, str]) -> bool:
        """Whether this is an unsigned scrape of ``/metrics`` (while exposition is on)."""
        return self._expose and exposition.is_metrics_request(method, path, query_string, headers)

    async def answer(self) -> HttpResponse:
        return await exposition.answer(self.recorder, self.depths,
                                       self.siblings.others if self.siblings is not None else None)

    def start(self) -> None:
        if self.depths is not None:
            self._periodic.append(Periodic("queue depths", self._collect_seconds, self._refresh))
        elif self.siblings is not None and self.publisher is None:
            # Another process of the port collects the depths: the queues it lists say whose counters may go.
            self._periodic.append(Periodic("forgetting idle queues", SIBLINGS_FORGET_SECONDS, self._forget_idle,
                                           first_wait=True))
        if self.publisher is not None:
            self._periodic.append(Periodic("CloudWatch publishing", self._publish_seconds, self._publish,
                                           first_wait=True))
        for periodic in self._periodic:
            periodic.start()

    async def close(self) -> None:
        for periodic in self._periodic:
            await periodic.close()
        if self._periodic and self.publisher is not None:
            # The counts of the last, unfinished period would be lost otherwise.
            try:
                await asyncio.wait_for(self.publisher.publish(), FINAL_PUBLISH_SECONDS)
            except Exception as exc:
                log.warning("CloudWatch: the last period's data were not published: %r", exc)
        self._periodic = []

    async def _refresh(self) -> None:
        assert self.depths is not None
        await self.depths.refresh()
        if self.publisher is None and self.depths.passes != self._passes_seen:
            self._passes_seen = self.depths.passes
            await self._forget_idle()

    async def _publish(self) -> None:
        assert self.publisher is not None
        await self.publisher.publish()
        # After publishing: a queue's counters go only once CloudWatch has had every count.
        await self._forget_idle()

    async def _forget_idle(self) -> None:
        listed = self.depths.listed if self.depths is not None else None
        if listed is None and self.siblings is not None:
            # Read in a thread: the siblings' files are the size of the port's queue figures.
            listed = _listed_by_collector(await asyncio.to_thread(self.siblings.others))
        if listed is not None:
            self._activity = self.recorder.forget_idle(listed, self._activity)


def _listed_by_collector(others: list[Counts]) -> frozenset[QueueKey] | None:
    """The live queues as the port's depth collector last saw them: those it holds depths of (it drops a queue's
    once a whole pass over the catalog missed it). None while it has written none."""
    newest = newest_depths(others)
    return frozenset(newest.depths) if newest is not None else None


def build_gateway_metrics(settings: Settings, catalog: QueueCatalog, dispatcher: Dispatcher,
                          actions: Collection[str], siblings: Siblings | None = None) -> GatewayMetrics | None:
    """The metrics the settings ask for; None when neither ``/metrics`` nor CloudWatch is on."""
    if not (settings.metrics_enabled or settings.cloudwatch_enabled):
        return None
    recorder = FrontendMetrics(settings.region, actions)
    depths: QueueDepths | None = None
    if settings.metrics_collect_seconds > 0:
        depths = QueueDepths(catalog.scan, _shard_depths(dispatcher), home_region=settings.region,
                             max_queues=settings.metrics_max_queues)
    publisher: CloudWatchPublisher | None = None
    if settings.cloudwatch_enabled and settings.cloudwatch_publish_seconds > 0:
        put = boto3_put(lambda region: client("cloudwatch", settings.with_(region=region)))
        publisher = CloudWatchPublisher(put, recorder, depths, namespace=settings.cloudwatch_namespace,
                                        wall=time.time)
    return GatewayMetrics(recorder, depths, publisher, expose=settings.metrics_enabled,
                          collect_seconds=settings.metrics_collect_seconds,
                          publish_seconds=settings.cloudwatch_publish_seconds, siblings=siblings)


def _shard_depths(dispatcher: Dispatcher) -> Callable[[QueueRecord], Awaitable[list[Mapping[str, int]]]]:
    async def shard_depths(queue: QueueRecord) -> list[Mapping[str, int]]:
        retention = queue_attributes.int_value(queue.attributes, "MessageRetentionPeriod")

        async def depth(worker: Any, partition: int, queue_id: str) -> Mapping[str, int]:
            return await worker.depth(partition, queue_id, retention_seconds=retention)

        return await dispatcher.on_every_shard(queue, depth, idempotent=True)

    return shard_depths

