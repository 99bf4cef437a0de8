"""One mapping's poller: receive a batch, deliver it, delete what succeeded; several such loops at once.

Receives, deletes and the queue's own rules (receive counts, the move to the dead-letter queue after
``maxReceiveCount``, FIFO group locks, decryption) are the SQS action handlers', run as the mapping's owner: a
poller is a client of the front end's services that skips HTTP. A message is deleted only after its delivery
succeeded, so a failed delivery, a dying host or a cancelled loop leaves it to come back after its visibility
timeout (at least once, never lost).

Concurrency is additive increase, multiplicative decrease: a loop is added after a full batch went through
while fewer than the cap run; a failed or throttled delivery halves the loops wanted (the extra ones end after
their batch) and the loop that saw it waits with exponential back-off (full jitter) before it receives again, so
a failing target stops taking messages instead of churning their receive counts. Mappings never share loops.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson

from ferrymq.aws.credentials import Credential
from ferrymq.errors import QueueDoesNotExist, SqsError
from ferrymq.event_waits import wait_set
from ferrymq.frontend.actions import messages
from ferrymq.frontend.context import RequestContext, Services
from ferrymq.frontend.push.metrics import PushMetrics
from ferrymq.frontend.push.targets import NO_ANSWER, Delivery
from ferrymq.frontend.queue_urls import queue_url
from ferrymq.metadata import queue_attributes
from ferrymq.metadata.event_source_mappings import Mapping
from ferrymq.push import filters, records
from ferrymq.push.mapping import MappingConfig, queue_of

log = logging.getLogger(__name__)

LONG_POLL_SECONDS = 20
RECEIVE_MAX = 10
DEFAULT_MAX_CONCURRENCY = 20
MIN_BACKOFF_SECONDS, MAX_BACKOFF_SECONDS = 1.0, 60.0
PUSH_PRINCIPAL = "ferrymq-push"
OK = "OK"
PARTIAL, INVALID, FAILED = "PARTIAL", "INVALID", "FAILED"


def concurrency_cap(config: MappingConfig) -> int:
    return config.max_concurrency or DEFAULT_MAX_CONCURRENCY


class Target(Protocol):
    async def deliver(self, body: bytes, timeout: float) -> Delivery: ...

    def close(self) -> None: ...


class MappingPoller:
    def __init__(self, mapping: Mapping, services: Services, target: Target,
                 report: Callable[[str], Awaitable[None]], *, rng: random.Random | None = None,
                 metrics: PushMetrics | None = None) -> None:
        self.mapping = mapping
        self._metrics = metrics or PushMetrics()
        self._config: MappingConfig = mapping.config
        self._services = services
        self._target = target
        self._report = report
        self._rng = rng or random.Random()
        self._region, self._queue_account, self._queue_name = queue_of(mapping.config.queue_arn)
        self._fifo = self._queue_name.endswith(".fifo")
        settings = services.settings
        base = settings.queue_url_base or "http://localhost"
        self._url = queue_url(base, self._queue_account, self._queue_name, region=self._region,
                              home_region=settings.region, form=settings.queue_url_form)
        self._base = base
        self._patterns = [filters.parse_pattern(p) for p in self._config.filters]
        self._cap = concurrency_cap(self._config)
        self._wanted = 1
        self._running = 0
        # Set when more loops are wanted, so they start at once rather than at run()'s next look.
        self._grow = asyncio.Event()
        self._stopping = False
        # Set by stop(): a loop waiting out a back-off holds no batch, so it ends at once instead of sleeping on
        # (up to MAX_BACKOFF_SECONDS) while its host stops.
        self._stopped = asyncio.Event()
        # The first receive of each gather, while it holds no message yet: what stop(now=True) may cancel.
        self._idle_polls: set[asyncio.Future[list[dict[str, Any]]]] = set()
        self._backoff = 0.0
        self.in_flight_batches = 0
        self.most_batches_in_flight = 0

    def _context(self, action: str) -> RequestContext:
        credential = Credential(access_key_id=PUSH_PRINCIPAL, secret_access_key="", account_id=self.mapping.account,
                                user_name=PUSH_PRINCIPAL, region=self._region)
        return RequestContext(services=self._services, credential=credential, base_url=self._base, action=action)

    def stop(self, *, now: bool = False) -> None:
        """Finish the batches under way (a long poll ends within 20 s) and start no more: a receive cancelled
        mid-way could hold its messages in flight, undelivered, for a whole visibility timeout. ``now``: also end
        the long polls that hold nothing yet (a host shutting down), taking that small risk. A loop waiting out a
        back-off holds no batch: it ends at once."""
        self._stopping = True
        self._grow.set()
        self._stopped.set()
        if now:
            for poll in list(self._idle_polls):
                poll.cancel()

    async def run(self) -> None:
        """Deliver until cancelled, or until stopped and the batches under way are done."""
        loops: set[asyncio.Task[None]] = set()
        try:
            while not (self._stopping and not loops):
                while self._running < self._wanted and not self._stopping:
                    self._running += 1
                    loops.add(asyncio.create_task(self._loop()))
                self._grow.clear()
                grow = asyncio.create_task(self._grow.wait())
                done, _ = await asyncio.wait({*loops, grow}, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
                grow.cancel()
                done.discard(grow)
                loops -= done
                for task in done:
                    if not task.cancelled() and task.exception() is not None:
                        log.error("mapping %s: a delivery loop failed: %r", self.mapping.uuid, task.exception())
        finally:
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)

    async def _loop(self) -> None:
        self._metrics.concurrency(self.mapping.uuid, self._running)
        try:
            while self._running <= self._wanted and not self._stopping:
                if self._backoff:
                    await wait_set(self._stopped, self._rng.uniform(0, self._backoff))
                    if self._stopping:
                        break
                await self._once()
        finally:
            self._running -= 1
            self._metrics.concurrency(self.mapping.uuid, self._running)

    async def _once(self) -> None:
        try:
            received = await self._gather()
        except SqsError as exc:
            self._metrics.failure(self.mapping.uuid, "receive")
            await self._failed(f"PROBLEM: {self._problem(exc)}", throttled=False)
            return
        if not received:
            return
        uuid = self.mapping.uuid
        batch = [records.record(m, self._config.queue_arn, self._region) for m in received]
        passing = [r for r in batch if filters.matches_any(self._patterns, r)]
        if len(passing) < len(batch):
            await self._delete([r for r in batch if r not in passing])
            self._metrics.records(uuid, "filtered", len(batch) - len(passing))
        if not passing:
            return
        sent = [int(r["attributes"].get("SentTimestamp", 0)) for r in passing]
        self._metrics.oldest(uuid, self._services.clock.now() - min(sent) / 1000)
        runs = records.split(passing)
        outcomes = []
        for index, run in enumerate(runs):
            outcomes.append(await self._deliver(run))
            # A failed target takes nothing more of this batch; on a FIFO queue any failure stops the rest, so
            # no group skips ahead of a kept message.
            if outcomes[-1] == FAILED or (outcomes[-1] != OK and self._fifo):
                self._metrics.records(uuid, "kept", sum(len(later) for later in runs[index + 1:]))
                return
        self._backoff = 0.0
        if INVALID not in outcomes:
            await self._report(OK)
        if len(received) >= self._config.batch_size and self._wanted < self._cap:
            self._wanted += 1
            self._grow.set()

    async def _deliver(self, run: list[dict[str, Any]]) -> str:
        """Deliver one run of records and delete what it took: OK, PARTIAL (some kept), INVALID (all kept: the
        answer could not be read) or FAILED (all kept: the target failed)."""
        uuid = self.mapping.uuid
        loop = asyncio.get_running_loop()
        self.in_flight_batches += 1
        self.most_batches_in_flight = max(self.most_batches_in_flight, self.in_flight_batches)
        started = loop.time()
        try:
            delivery = await self._target.deliver(orjson.dumps(records.event(run)), await self._timeout())
        finally:
            self.in_flight_batches -= 1
        took = loop.time() - started
        if not delivery.ok:
            self._metrics.batch(uuid, "failed", took)
            self._metrics.failure(uuid, "throttled" if delivery.throttled else "target")
            self._metrics.records(uuid, "kept", len(run))
            await self._failed(f"PROBLEM: Function call failed: {delivery.detail}", throttled=delivery.throttled)
            return FAILED
        try:
            if self._config.report_failures and delivery.answer is NO_ANSWER:
                raise records.BatchFailed("the answer is not JSON")
            kept = records.failed_ids(delivery.answer, run, report_failures=self._config.report_failures,
                                      fifo=self._fifo)
        except records.BatchFailed as exc:
            self._metrics.batch(uuid, "invalid", took)
            self._metrics.failure(uuid, "answer")
            self._metrics.records(uuid, "kept", len(run))
            await self._report(f"PROBLEM: Function response invalid: {exc}")
            return INVALID
        self._metrics.batch(uuid, "delivered", took)
        self._metrics.records(uuid, "delivered", len(run) - len(kept))
        self._metrics.records(uuid, "kept", len(kept))
        await self._delete([r for r in run if r["messageId"] not in kept])
        return PARTIAL if kept else OK

    async def _gather(self) -> list[dict[str, Any]]:
        """Up to BatchSize messages: what one long poll brings, or with a batching window, what arrives within
        the window from the first message on."""
        size, window = self._config.batch_size, self._config.window_seconds
        loop = asyncio.get_running_loop()
        if self._stopping:
            return []
        first = asyncio.ensure_future(self._receive(min(RECEIVE_MAX, size), LONG_POLL_SECONDS))
        self._idle_polls.add(first)
        try:
            got = await first
        finally:
            self._idle_polls.discard(first)
        if not got or not window:
            return got
        deadline = loop.time() + window
        while len(got) < size and not self._stopping:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            more = await self._receive(min(RECEIVE_MAX, size - len(got)), min(LONG_POLL_SECONDS, int(remaining)))
            if not more and remaining < 1:
                await asyncio.sleep(min(remaining, 0.2))
            got += more
        return got

    async def _receive(self, count: int, wait: int) -> list[dict[str, Any]]:
        params = {"QueueUrl": self._url, "MaxNumberOfMessages": count, "WaitTimeSeconds": wait,
                  "MessageSystemAttributeNames": ["All"], "MessageAttributeNames": ["All"]}
        answer = await messages.receive_message(self._context("ReceiveMessage"), params)
        return list(answer.get("Messages", []))

    async def _delete(self, done: list[dict[str, Any]]) -> None:
        for start in range(0, len(done), RECEIVE_MAX):
            entries = [{"Id": str(i), "ReceiptHandle": r["receiptHandle"]}
                       for i, r in enumerate(done[start:start + RECEIVE_MAX])]
            try:
                answer = await messages.delete_message_batch(self._context("DeleteMessage"),
                                                             {"QueueUrl": self._url, "Entries": entries})
            except SqsError as exc:
                # Not deleted: they come back after their visibility timeout, delivered again (at least once).
                log.warning("mapping %s: deleting delivered messages failed: %s", self.mapping.uuid, exc.code)
                continue
            for failure in answer.get("Failed") or []:
                log.warning("mapping %s: a delivered message was not deleted: %s", self.mapping.uuid,
                            failure.get("Code"))

    async def _timeout(self) -> float:
        queue = await self._services.catalog.get(self._queue_account, self._queue_name, self._region)
        return float(queue_attributes.int_value(queue.attributes, "VisibilityTimeout"))

    async def _failed(self, result: str, *, throttled: bool) -> None:
        self._wanted = max(1, self._wanted // 2)
        self._backoff = min(MAX_BACKOFF_SECONDS, max(MIN_BACKOFF_SECONDS, self._backoff * 2))
        log.info("mapping %s: %s (backing off up to %.0f s%s)", self.mapping.uuid, result, self._backoff,
                 ", throttled" if throttled else "")
        await self._report(result)

    def _problem(self, exc: SqsError) -> str:
        if isinstance(exc, QueueDoesNotExist):
            return "The queue does not exist."
        return f"Error occurred while ReceiveMessage: {exc.code}"
