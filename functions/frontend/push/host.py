"""A push host: holds leases on event-source mappings and runs a poller for each one it holds.

Every ``lease / 3`` it reads every mapping (one paged Scan), renews the leases it holds, stops the pollers of
mappings that went, were disabled or changed (a changed one starts again with its new configuration), and
claims enabled mappings whose lease is free or expired (``until + skew`` behind its clock). A renewal that fails
means another host claimed the mapping after this one's lease ran out: its poller stops at once. Stopping
cleanly gives the leases up, so another host takes them at its next pass instead of after expiry.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import urllib3
from botocore.config import Config

from ferrymq.aws import session
from ferrymq.bulkhead import off_loop
from ferrymq.event_waits import wait_set
from ferrymq.frontend.context import Services
from ferrymq.frontend.push.metrics import PushMetrics
from ferrymq.frontend.push.poller import MappingPoller, Target, concurrency_cap
from ferrymq.frontend.push.targets import MAX_TIMEOUT_SECONDS, HttpTarget, LambdaTarget
from ferrymq.metadata.event_source_mappings import Mapping, MappingStore
from ferrymq.metadata.mapping_leases import Leased, MappingLeases
from ferrymq.push.destinations import DestinationPolicy

log = logging.getLogger(__name__)

DEFAULT_LEASE_SECONDS = 10.0
SKEW_ALLOWANCE_MS = 2000
LAMBDA_CONNECTIONS = 64
# How long a stopped poller may finish the batches it has under way before it is cancelled; a host shutting down
# gives them CLOSE_DRAIN_SECONDS, within the 10 s `ferrymq up` (and ECS, by default) allow a process to stop.
DRAIN_SECONDS = 60.0
CLOSE_DRAIN_SECONDS = 8.0
# One attempt per batch (a failed batch comes back after its visibility timeout), and long enough to wait for a
# function that runs to Lambda's limit.
_LAMBDA_CONFIG = Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=5,
                        read_timeout=MAX_TIMEOUT_SECONDS + 10, max_pool_connections=LAMBDA_CONNECTIONS)


@dataclass
class _Held:
    mapping: Mapping
    epoch: int
    poller: MappingPoller
    target: Target
    task: asyncio.Task[None]
    last_result: str = field(default="")


def host_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class PushHost:
    def __init__(self, services: Services, store: MappingStore, leases: MappingLeases, *,
                 lease_seconds: float = DEFAULT_LEASE_SECONDS, owner: str | None = None,
                 make_target: Callable[[Mapping], Target] | None = None, metrics: PushMetrics | None = None,
                 metrics_url: str = "") -> None:
        self.owner = owner or host_id()
        self.metrics = metrics or PushMetrics()
        self._metrics_url = metrics_url
        self._services = services
        self._store = store
        self._leases = leases
        self._lease_ms = int(lease_seconds * 1000)
        self._http = urllib3.PoolManager(num_pools=64, maxsize=8)
        self._make_target = make_target or self._target
        self._lambda: object = None
        self.held: dict[str, _Held] = {}
        # The drains of pollers stopped while the host runs (their mappings moved or went), with their pollers.
        self._draining: dict[asyncio.Task[None], MappingPoller] = {}
        self._passes = 0

    @property
    def pass_seconds(self) -> float:
        return self._lease_ms / 3000

    def _now_ms(self) -> int:
        return int(self._services.clock.now() * 1000)

    def _target(self, mapping: Mapping) -> Target:
        threads = ThreadPoolExecutor(concurrency_cap(mapping.config), thread_name_prefix=f"push-{mapping.uuid[:8]}")
        if mapping.config.function_arn is not None:
            if self._lambda is None:
                self._lambda = session.client("lambda", self._services.settings, config=_LAMBDA_CONFIG)
            return LambdaTarget(self._lambda, mapping.config.function_arn, threads)
        secret = self._store.secret_of(mapping.account, mapping.uuid)
        if mapping.config.url is None or secret is None:
            threads.shutdown()
            raise ValueError(f"mapping {mapping.uuid} has no Destination to push to")
        return HttpTarget(mapping.config.url, mapping.uuid, secret, self._http, threads,
                          policy=DestinationPolicy.of(self._services.settings.push_allowed_networks))

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                try:
                    await self.step()
                except Exception:
                    log.exception("push host pass failed")
                await wait_set(stop, self.pass_seconds)
        finally:
            await self.close()

    async def step(self) -> None:
        """One pass: say this host lives (every third pass: once a lease), renew, stop, claim."""
        if self._passes % 3 == 0:
            await off_loop(self._services.metadata, self._leases.heartbeat, self.owner, self._metrics_url,
                           self._now_ms())
        self._passes += 1
        mappings, hosts = await off_loop(self._services.metadata, self._leases.survey)
        seen = {leased.mapping.uuid: leased for leased in mappings}
        for mapping_uuid, held in list(self.held.items()):
            now = seen.get(mapping_uuid)
            mine = now is not None and now.owner == self.owner and now.epoch == held.epoch
            if not mine or now is None or not now.mapping.config.enabled:
                await self._stop(mapping_uuid, release=mine)
                continue
            renewed = await off_loop(self._services.metadata, self._leases.renew, held.mapping, self.owner,
                                     held.epoch, self._now_ms() + self._lease_ms)
            if not renewed:
                await self._stop(mapping_uuid, release=False)
            elif now.mapping.version != held.mapping.version:
                await self._stop(mapping_uuid, release=False)
                await self._start(now.mapping, held.epoch)
        # A fair share, so that hosts split the mappings without a coordinator: the live hosts are those whose
        # heartbeat is younger than two leases (this one always counts).
        now_ms = self._now_ms()
        live = {h["owner"] for h in hosts if h["heartbeat_ms"] + 2 * self._lease_ms + SKEW_ALLOWANCE_MS >= now_ms}
        enabled = sum(leased.mapping.config.enabled for leased in mappings)
        share = -(-enabled // len(live | {self.owner})) + 1
        for mapping_uuid, leased in seen.items():
            if len(self.held) >= share:
                break
            if mapping_uuid not in self.held and leased.mapping.config.enabled \
                    and leased.free(now_ms, SKEW_ALLOWANCE_MS):
                await self._claim(leased)

    async def _claim(self, leased: Leased) -> None:
        epoch = await off_loop(self._services.metadata, self._leases.claim, leased, self.owner,
                               self._now_ms() + self._lease_ms)
        if epoch is not None:
            log.info("push host %s took mapping %s (epoch %d)", self.owner, leased.mapping.uuid, epoch)
            await self._start(leased.mapping, epoch)

    async def _start(self, mapping: Mapping, epoch: int) -> None:
        try:
            target = await off_loop(self._services.metadata, self._make_target, mapping)
        except Exception as exc:
            log.error("mapping %s cannot start: %s", mapping.uuid, exc)
            await off_loop(self._services.metadata, self._leases.release, mapping, self.owner, epoch)
            return

        async def report(result: str) -> None:
            held = self.held.get(mapping.uuid)
            if held is None or held.last_result == result:
                return
            held.last_result = result
            await off_loop(self._services.metadata, self._leases.report, mapping, self.owner, epoch, result)

        poller = MappingPoller(mapping, self._services, target, report, metrics=self.metrics)
        self.held[mapping.uuid] = _Held(mapping, epoch, poller, target, asyncio.create_task(poller.run()),
                                        mapping.last_result)

    async def _stop(self, mapping_uuid: str, *, release: bool) -> None:
        """Stop a poller: it finishes its batches under way in the background (at least once: another host may
        deliver them again), up to DRAIN_SECONDS."""
        held = self.held.pop(mapping_uuid)
        held.poller.stop()
        drain = asyncio.create_task(self._drain(held.task, lambda: self._forget(mapping_uuid, held.target)))
        self._draining[drain] = held.poller
        drain.add_done_callback(self._drained)
        if release:
            await off_loop(self._services.metadata, self._leases.release, held.mapping, self.owner, held.epoch)
        log.info("push host %s stopped mapping %s", self.owner, mapping_uuid)

    def _drained(self, drain: asyncio.Task[None]) -> None:
        self._draining.pop(drain, None)

    def _forget(self, mapping_uuid: str, target: Target) -> None:
        target.close()
        if mapping_uuid not in self.held:
            self.metrics.forget(mapping_uuid)

    @staticmethod
    async def _drain(task: asyncio.Task[None], then: Callable[[], None]) -> None:
        try:
            await asyncio.wait_for(task, DRAIN_SECONDS)
        except TimeoutError:
            pass
        except Exception:
            log.exception("a stopped poller failed")
        finally:
            then()

    async def close(self) -> None:
        """Stop every poller: idle long polls at once, batches under way given CLOSE_DRAIN_SECONDS to be delivered
        and deleted; then give the leases up, so another host takes the mappings at its next pass rather than
        after expiry, and without delivering what this one is still delivering."""
        held = list(self.held.values())
        self.held.clear()
        for h in held:
            h.poller.stop(now=True)
        # Pollers stopped earlier may still be in a long poll that holds nothing: it ends now too, rather than
        # holding the host's stop for CLOSE_DRAIN_SECONDS.
        for poller in list(self._draining.values()):
            poller.stop(now=True)
        running = [h.task for h in held] + list(self._draining)
        if running:
            _, late = await asyncio.wait(running, timeout=CLOSE_DRAIN_SECONDS)
            for task in late:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
        for h in held:
            h.target.close()
            self.metrics.forget(h.mapping.uuid)
            try:
                await off_loop(self._services.metadata, self._leases.release, h.mapping, self.owner, h.epoch)
            except Exception:
                log.exception("giving up mapping %s failed", h.mapping.uuid)
        try:
            await off_loop(self._services.metadata, self._leases.forget_host, self.owner)
        except Exception:
            log.exception("removing push host %s's item failed", self.owner)
