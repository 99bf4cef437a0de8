"""The worker's controller: reads the cluster's replica sets and posts each partition's to its actor.

Every ``poll_seconds`` (at once when a follower reports trouble; every ``steady_poll_seconds`` while
:meth:`ClusterController.steady`) it reads the cluster's replica sets (one strongly consistent scan of the
partitions table, :class:`~ferrymq.aws.replica_sets.ReplicaSets`) and posts each hosted partition's set to that
partition's :class:`~.partition_actor.PartitionActor`, which owns the partition's role, lease and in-sync set and
plays the set (claims, leads, follows or stands by). The controller never waits for a role change: a pass ends when
its scan is posted.

Leadership is handed back to a partition's preferred replica (the first of its list, which placement
spreads over the workers) once that replica has been in sync and caught up for ``handover_after_ms``: the
leader releases its lease (``ReplicaSets.release``) and stands by, the preferred replica claims first (rank
0), and the old leader claims back only if nobody did within a lease. A worker marked leaving in the
registry (``ferrymq cluster remove-worker``; its heartbeat's answer says so) hands over as soon as the
preferred replica is in sync and caught up, handovers on or off, and the in-cluster manager never places a
replica on it.

A partition without a replica set gets one with this worker alone (a worker started on its own); a replica set
naming this worker for a partition it does not host yet gets a replica opened (``host``), then an actor.  The
worker also heartbeats in the cluster's registry, for the managers and ``ferrymq cluster status``, and whoever
holds the manager lease replaces dead workers' replicas.

Coordination calls run on a client whose calls end within half a lease (``ReplicaSets.from_settings``) and a
thread pool that only they use: a log replay holding the default executor's threads never delays a renewal.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ferrymq.aws.replica_sets import CoordinationError, ReplicaSets
from ferrymq.aws.workers import WorkerRegistry, WorkerState
from ferrymq.clock import Clock, SystemClock
from ferrymq.errors import SqsError
from ferrymq.event_waits import wait_set
from ferrymq.placement import replacements
from ferrymq.replication_rules import Acks, ReplicaSet
from ferrymq.storage.replication.partition_actor import PartitionActor, Replica

log = logging.getLogger(__name__)


COORDINATION_THREADS = 8
"""Threads for one worker's coordination calls (scans, lease and in-sync set writes, heartbeats)."""
MANAGER_SECONDS = 5.0
"""The manager's cadence at most (``ControllerTimes.manager_seconds``): half the grace, unless that is more."""
MANAGER_LEAST_SECONDS = 0.5
"""The manager's cadence at least, however short the grace."""


@dataclass(frozen=True)
class ControllerTimes:
    lease_ms: int = 5_000
    poll_seconds: float = 0.5
    steady_poll_seconds: float = 5.0
    """The pause between scans while every partition here is led and served (see ``steady``): a scan then only
    finds replicas added to this worker. Trouble (a follower's failed fetch) still wakes the loop at once, so
    failover does not wait on it; an idle cluster makes a tenth of the scans. Each costs DynamoDB a read of the
    whole partitions table, and a stand-in on the same machine 3 ms of CPU."""
    isr_check_seconds: float = 0.2
    max_lag_ms: int = 2_000
    heartbeat_seconds: float = 3.0
    claim_stagger_ms: int = 300
    handover_after_ms: int = 10_000
    """How long the preferred leader (the first replica) must have been caught up, in sync and not leading
    before the leader hands leadership back to it; 0 turns handovers off."""
    trouble_pause_seconds: float = 0.1
    """The least time between two reads of the item prompted by followers' trouble."""
    manager_seconds: float = MANAGER_SECONDS
    """How often the in-cluster manager (whoever holds its lease) looks for dead replicas to replace (half the
    grace, from ``controller_times``); its lease lasts three times that."""
    grace_ms: int = 10_000
    """A worker silent this long is dead: its replicas are replaced."""


class ClusterController:
    def __init__(
        self,
        me: str,
        cluster: str,
        replicas: Mapping[int, Replica],
        address: tuple[str, int],
        sets: ReplicaSets,
        registry: WorkerRegistry | None,
        *,
        acks: Acks = Acks.MAJORITY,
        times: ControllerTimes | None = None,
        clock: Clock | None = None,
        host: Callable[[int], Awaitable[Replica]] | None = None,
        replication_address: tuple[str, int] | None = None,
        admin_address: tuple[str, int] | None = None,
    ) -> None:
        """``host`` opens a replica of a partition this worker was just added to (None: only the replicas
        given are played); ``replication_address`` is where followers are told to fetch from, when not
        ``address``.  ``clock``: its wall time goes into coordination items (leases, heartbeats), compared on
        other machines; every local deadline (renewal cadence, the answer window, stuck replies, handovers)
        is on its monotonic clock, which a stepped wall clock does not move."""
        self.me = me
        self.cluster = cluster
        self.replicas = replicas
        self.address = address
        self.sets = sets
        self.registry = registry
        self.acks = Acks(acks)
        self.times = times or ControllerTimes()
        self.clock = clock or SystemClock()
        self.host = host
        self.replication_address = replication_address
        self.admin_address = admin_address
        """The worker's admin HTTP listener, published with each heartbeat (``ferrymq cluster status``)."""
        self.started_ms = self.now_ms()
        self.reassignments = 0
        """Replicas this worker, as the cluster's manager, replaced."""
        self.polls = 0
        self.scans_begun = 0
        self.leaving = False
        """The registry marks this worker leaving: it hands its leaderships over to their preferred replicas."""
        self.actors: dict[int, PartitionActor] = {}
        """Per hosted partition, its owner."""
        self._scanned: list[ReplicaSet] = []
        """The cluster's replica sets as the last poll read them (the manager plans from it: a plan made from
        a stale read is refused by ``reassign``'s condition)."""
        self._wake = asyncio.Event()
        self._woken_ms: int | None = None
        """When (monotonic ms) something last asked for a pass: trouble, a role change ended, a lost race."""
        self._running = False
        self._tasks: list[asyncio.Task[None]] = []
        self._hosting: dict[int, asyncio.Task[None]] = {}
        """Per partition this worker was added to, the opening of its replica under way."""
        self._calls = ThreadPoolExecutor(COORDINATION_THREADS, thread_name_prefix="coordination")
        """Coordination calls only: a log replay holding the default executor's threads never delays a renewal."""

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._calls, functools.partial(fn, *args, **kwargs))

    def now_ms(self) -> int:
        """Wall time (ms), for what other machines compare: lease expiries, heartbeats."""
        return int(self.clock.now() * 1000)

    def mono_ms(self) -> int:
        """Monotonic time (ms), for this worker's own deadlines."""
        return int(self.clock.monotonic() * 1000)

    # --- running ------------------------------------------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._running = True
        self._tasks = [loop.create_task(self._poll_loop())]
        for actor in self._actors_now().values():
            actor.start_loops()
        if self.registry is not None:
            self._tasks.append(loop.create_task(self._heartbeat_loop()))
            self._tasks.append(loop.create_task(self._manager_loop()))

    async def close(self) -> None:
        tasks = [*self._tasks, *self._hosting.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(actor.close() for actor in self.actors.values()))
        self._tasks = []
        self._calls.shutdown(wait=False, cancel_futures=True)

    def wake(self) -> None:
        """Read the coordination items again soon (a follower lost its leader, or was refused)."""
        self._woken_ms = self.mono_ms()
        self._wake.set()

    def _actors_now(self) -> dict[int, PartitionActor]:
        """The actors, one per replica the worker holds (replicas are only ever added: a hosted one gets its
        actor here)."""
        for partition, replica in self.replicas.items():
            if partition not in self.actors:
                actor = self.actors[partition] = PartitionActor(partition, replica, self)
                actor.start()
                if self._running:
                    actor.start_loops()
        return self.actors

    async def _poll_loop(self) -> None:
        while True:
            try:
                await self.scan()
            except SqsError as exc:
                log.warning("cluster %s: reading the replica sets failed: %s", self.cluster, exc.__cause__ or exc)
            except Exception:
                log.exception("cluster %s: controller step failed", self.cluster)
            pause = self.times.steady_poll_seconds if self.steady() else self.times.poll_seconds
            if await wait_set(self._wake, pause):
                self._wake.clear()
                await asyncio.sleep(self.times.trouble_pause_seconds)

    async def _heartbeat_loop(self) -> None:
        assert self.registry is not None
        while True:
            try:
                info = await self.call(
                    self.registry.heartbeat,
                    self.me,
                    self.cluster,
                    *self.address,
                    self.now_ms(),
                    WorkerState.SERVING,
                    started_at_ms=self.started_ms,
                    admin=self.admin_address,
                )
                if info.state is WorkerState.LEAVING and not self.leaving:
                    log.warning("cluster %s: this worker is leaving; handing its leaderships over", self.cluster)
                self.leaving = info.state is WorkerState.LEAVING
            except SqsError as exc:
                log.warning("heartbeat failed: %s", exc.__cause__ or exc)
            except Exception:
                log.exception("heartbeat failed")
            await asyncio.sleep(self.times.heartbeat_seconds)

    async def _manager_loop(self) -> None:
        """Act as the in-cluster manager while holding its lease: replace dead replicas (see ``replacements``)."""
        assert self.registry is not None
        lease_ms = int(self.times.manager_seconds * 3000)
        pause = self.times.manager_seconds
        while True:
            await asyncio.sleep(pause)
            # Another worker's lease runs a whole lease from its last renewal: asking again sooner only fails.
            pause = lease_ms / 1000
            try:
                if await self.call(
                    self.registry.hold_manager_lease, self.cluster, self.me, self.now_ms(), lease_ms
                ):
                    pause = self.times.manager_seconds
                    await self.manage_once()
            except (SqsError, CoordinationError) as exc:
                log.warning("cluster %s: manager step failed: %s", self.cluster, exc.__cause__ or exc)
            except Exception:
                log.exception("cluster %s: manager step failed", self.cluster)

    async def manage_once(self) -> None:
        assert self.registry is not None
        alive, dead = await self.call(self.registry.members, self.cluster, self.now_ms(), self.times.grace_ms)
        if not dead:
            return
        sets = self._scanned
        plan = replacements(
            [(rs.partition, rs.leader, rs.replicas) for rs in sets],
            # A leaving worker is on its way out: it takes no replica (its own are moved by whoever removes it).
            [w.worker_id for w in alive if w.state is not WorkerState.LEAVING],
            [w.worker_id for w in dead],
        )
        by_partition = {rs.partition: rs for rs in sets}
        for partition, replicas in plan.items():
            rs = by_partition[partition]
            await self.call(self.sets.reassign, partition, rs.epoch, replicas, previous=rs.replicas)
            self.reassignments += 1
            log.warning(
                "cluster %s: partition %d re-replicated: %s -> %s (dead: %s)",
                self.cluster,
                partition,
                ",".join(rs.replicas),
                ",".join(replicas),
                ",".join(sorted(set(rs.replicas) - set(replicas))),
            )

    # --- one pass -------------------------------------------------------------------------------------------

    async def poll_once(self) -> None:
        """Read the replica sets, post them to the partitions' actors, and wait until they have played them (at
        start-up: the partitions this worker is to lead are led when it returns)."""
        await self.scan()
        await self.settled()

    async def start_up(self, within_seconds: float) -> None:
        """Passes until every partition this worker holds a replica of is led by someone (this worker's claim may
        have failed on a slow coordination call), for at most ``within_seconds``: what a ready worker promises."""
        deadline = self.clock.monotonic() + within_seconds
        await self.poll_once()
        while self.leaderless() and self.clock.monotonic() < deadline:
            await asyncio.sleep(self.times.trouble_pause_seconds)
            await self.poll_once()

    def leaderless(self) -> list[int]:
        """The partitions with a replica here (not one refusing its damaged log) that the last scan found without
        a replica set, or with one naming this worker and no live lease."""
        now = self.now_ms()
        scanned = {rs.partition: rs for rs in self._scanned}
        out = []
        for partition, replica in self.replicas.items():
            rs = scanned.get(partition)
            if getattr(replica, "refusing", False) or (rs is not None and self.me not in rs.replicas):
                continue
            if rs is None or rs.lease_until <= now:
                out.append(partition)
        return out

    def steady(self) -> bool:
        """Whether, as of the last scan, nothing here waits on the next one: no role change under way, not
        leaving, nothing asked for a pass within the slow cadence (a follower's trouble keeps asking), every
        replica held (not refusing a damaged copy) in a set naming this worker under a live lease, and either
        leading it (as its preferred replica, while handovers are on) or following it without a failure; no
        replica set names this worker for a partition it does not host yet."""
        if self._hosting or self.leaving or not self._scanned:
            return False
        if any(actor.changing is not None for actor in self.actors.values()):
            return False
        woken = self._woken_ms
        if woken is not None and self.mono_ms() - woken < self.times.steady_poll_seconds * 1000:
            return False
        now = self.now_ms()
        scanned = {rs.partition: rs for rs in self._scanned}
        for partition, replica in self.replicas.items():
            if getattr(replica, "refusing", False):
                continue
            rs = scanned.get(partition)
            if rs is None or self.me not in rs.replicas or rs.lease_until <= now:
                return False
            if replica.leading_epoch is None:
                follower = replica.follower
                if follower is None or follower.failure is not None:
                    return False
            elif rs.replicas[0] != self.me and self.times.handover_after_ms > 0:
                return False  # a handover to the preferred replica may come due: its passes keep the quick cadence
        return self.host is None or all(
            rs.partition in self.replicas for rs in self._scanned if self.me in rs.replicas
        )

    async def settled(self) -> None:
        """Return once every post so far is played and no role change, nor a replica's opening, is under way."""
        while self._hosting or any(actor.busy for actor in self.actors.values()):
            await asyncio.gather(*self._hosting.values(), return_exceptions=True)
            await asyncio.gather(*(actor.played() for actor in self.actors.values()))

    async def scan(self) -> None:
        """Read the replica sets and post each hosted partition's to its actor, without waiting for it to be
        played; open a replica of each partition a set newly names this worker for."""
        self.scans_begun += 1
        scan = self.scans_begun
        self._scanned = await self.call(self.sets.all, self.cluster)
        found = {rs.partition: rs for rs in self._scanned}
        self.polls += 1
        if self.host is not None:
            for partition, rs in sorted(found.items()):
                if self.me in rs.replicas and partition not in self.replicas and partition not in self._hosting:
                    task = asyncio.get_running_loop().create_task(self._open(partition))
                    self._hosting[partition] = task
        for partition, actor in self._actors_now().items():
            actor.post(found.get(partition), scan)

    async def _open(self, partition: int) -> None:
        """Open a replica of a partition this worker was just added to; the next pass gives it an actor."""
        assert self.host is not None
        try:
            await self.host(partition)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("partition %d: hosting a replica (this worker joined its replica set) failed", partition)
        finally:
            self._hosting.pop(partition, None)
            self.wake()
