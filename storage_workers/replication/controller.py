"""The worker's controller: plays, for every partition the worker holds, the role its coordination item says.

Every ``poll_seconds`` (at once when a follower reports trouble; every ``steady_poll_seconds`` while
:meth:`ClusterController.steady`) it reads the cluster's replica sets (one strongly consistent scan of the
partitions table, :class:`~ferrymq.aws.replica_sets.ReplicaSets`) and, per partition:

- **leading in the item's epoch**: renews the lease every third of it, unless replies have been stuck
  for a whole lease (then the lease is let lapse, so that an in-sync follower that can still reach the
  others takes over); every ``isr_check_seconds`` it drops followers lagging past ``max_lag_ms`` from the
  in-sync set and adds caught-up ones back (``LeaderStream.lagging``/``caught_up``).  The commit tracker's set
  is always a superset of the item's: a follower leaves it only after the item's conditional write dropped
  it, and joins it before the write that adds it is sent (Kafka's "maximal ISR"), so that nothing is
  committed without a replica that may be elected.  The leader is the only writer of its epoch's set, so it
  never takes the set back from a read of the item, which may be older than its own last write;
- **leading an older epoch**: deposed (a paused leader waking up): steps down at once;
- **may claim** (in sync, and the leader's lease lapsed, or the item names this worker leader: a restart):
  claims the next epoch, publishing its address, and leads.  In-sync replicas wait their rank in the
  replica list times ``claim_stagger_ms`` after the lease ends, so the preferred one usually wins without a
  race; a race is settled by the conditional write anyway;
- **otherwise**: follows the item's leader in the item's epoch (reconciling its log first).

Leadership is handed back to a partition's preferred replica (the first of its list, which placement
spreads over the workers) once that replica has been in sync and caught up for ``handover_after_ms``: the
leader releases its lease (``ReplicaSets.release``) and stands by, the preferred replica claims first (rank
0), and the old leader claims back only if nobody did within a lease. A worker marked leaving in the
registry (``ferrymq cluster remove-worker``; its heartbeat's answer says so) hands over as soon as the
preferred replica is in sync and caught up, handovers on or off, and the in-cluster manager never places a
replica on it.

A partition without a replica set gets one with this worker alone (a worker started on its own).  The
worker also heartbeats in the cluster's registry, for the managers and ``ferrymq cluster status``.

A lease renewal waits on nothing but its own write: renewals have a loop of their own, which needs no scan
(a leader knows its epoch), each renewal a task, on a client whose calls end within half a lease
(``ReplicaSets.from_settings``) and a thread pool that only coordination calls use.  The partitions of a
pass are handled concurrently, and role changes (lead, follow, stand by, hosting a new replica: a log
replay, a reconciliation) run as tasks of their own, one at a time per partition (a partition whose change
is under way is left alone until it is done).  One slow partition costs this worker no other partition's
lease, and a slow scan none at all.

Safety never depends on this loop's timing: a claim is fenced by the epoch it read, the in-sync set only
changes through the leader's epoch-fenced writes, and every replication request carries the epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from ferrymq.aws.replica_sets import CoordinationError, ReplicaSets
from ferrymq.aws.workers import WorkerRegistry, WorkerState
from ferrymq.clock import Clock, SystemClock
from ferrymq.errors import SqsError
from ferrymq.placement import replacements
from ferrymq.replication_rules import Acks, ReplicaSet, answers_until, may_claim
from ferrymq.storage.replication.roles import FollowerRole, LeaderRole

log = logging.getLogger(__name__)


class Replica(Protocol):
    """What the controller drives: :class:`ferrymq.storage.server.replica.PartitionReplica`."""

    @property
    def leading_epoch(self) -> int | None: ...

    following: tuple[tuple[str, int], int] | None
    term: Any
    """The leadership term (``LeaderTerm``), while leading."""
    follower: Any
    """The fetch loop (``Follower``), while following."""

    async def lead(self, role: LeaderRole) -> None: ...

    async def follow(self, role: FollowerRole, *, on_trouble: Callable[[], None] = ...) -> None: ...

    async def stand_by(self, reason: str) -> None: ...


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
        self.leaving = False
        """The registry marks this worker leaving: it hands its leaderships over to their preferred replicas."""
        self._scanned: list[ReplicaSet] = []
        """The cluster's replica sets as the last poll read them (the manager plans from it: a plan made from
        a stale read is refused by ``reassign``'s condition)."""
        self._wake = asyncio.Event()
        self._woken_ms: int | None = None
        """When (monotonic ms) something last asked for a pass: trouble, a role change ended, a lost race."""
        # Local times below are monotonic ms.
        self._renewed: dict[int, int] = {}
        """Per led partition, when the write of its last claim or renewal was sent."""
        self._stuck: dict[int, tuple[int, int]] = {}
        """Per led partition: the high watermark last seen with replies waiting, and since when."""
        self._led_since: dict[int, int] = {}
        self._released: dict[int, int] = {}
        """Partitions this worker handed over, and when: it leaves the next claim to the others for a while."""
        self._tasks: list[asyncio.Task[None]] = []
        self._changes: dict[int, asyncio.Task[None]] = {}
        """Per partition, the role change under way (see the module docstring)."""
        self._renewing: dict[int, asyncio.Task[None]] = {}
        """Per partition, the lease renewal under way."""
        self._calls = ThreadPoolExecutor(COORDINATION_THREADS, thread_name_prefix="coordination")
        """Coordination calls only: a log replay holding the default executor's threads never delays a renewal."""

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
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
        self._tasks = [
            loop.create_task(self._poll_loop()),
            loop.create_task(self._renew_loop()),
            loop.create_task(self._isr_loop()),
        ]
        if self.registry is not None:
            self._tasks.append(loop.create_task(self._heartbeat_loop()))
            self._tasks.append(loop.create_task(self._manager_loop()))

    async def close(self) -> None:
        tasks = [*self._tasks, *self._changes.values(), *self._renewing.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks = []
        self._calls.shutdown(wait=False, cancel_futures=True)

    def wake(self) -> None:
        """Read the coordination items again soon (a follower lost its leader, or was refused)."""
        self._woken_ms = self.mono_ms()
        self._wake.set()

    async def _poll_loop(self) -> None:
        while True:
            try:
                await self._pass()
            except SqsError as exc:
                log.warning("cluster %s: reading the replica sets failed: %s", self.cluster, exc.__cause__ or exc)
            except Exception:
                log.exception("cluster %s: controller step failed", self.cluster)
            pause = self.times.steady_poll_seconds if self.steady() else self.times.poll_seconds
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), pause)
            if self._wake.is_set():
                self._wake.clear()
                await asyncio.sleep(self.times.trouble_pause_seconds)

    async def _isr_loop(self) -> None:
        while True:
            await asyncio.sleep(self.times.isr_check_seconds)
            for partition, replica in list(self.replicas.items()):
                with self._own_failures(partition, "the in-sync set check"):
                    await self._check_isr(partition, replica)

    async def _heartbeat_loop(self) -> None:
        assert self.registry is not None
        while True:
            try:
                info = await self._call(
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
                if await self._call(
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
        alive, dead = await self._call(self.registry.members, self.cluster, self.now_ms(), self.times.grace_ms)
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
            await self._call(self.sets.reassign, partition, rs.epoch, replicas, previous=rs.replicas)
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
        """Read the replica sets, bring every partition's role in line with its item, and wait for the role
        changes that started (at start-up: the partitions this worker is to lead are led when it returns)."""
        await self._pass()
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
        if self._changes or self.leaving or not self._scanned:
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
        """Return once no role change is under way."""
        while self._changes:
            await asyncio.gather(*self._changes.values(), return_exceptions=True)

    async def _pass(self) -> None:
        self._scanned = await self._call(self.sets.all, self.cluster)
        found = {rs.partition: rs for rs in self._scanned}
        self.polls += 1
        if self.host is not None:
            for partition, rs in sorted(found.items()):
                if self.me in rs.replicas and partition not in self.replicas:
                    self._change(partition, "hosting a replica (this worker joined its replica set)",
                                 functools.partial(self.host, partition))
        replicas = list(self.replicas.items())
        await asyncio.gather(*(self._act_on(p, replica, found.get(p)) for p, replica in replicas))

    async def _act_on(self, partition: int, replica: Replica, rs: ReplicaSet | None) -> None:
        """One partition's part of a pass; its failures are its own."""
        if partition in self._changes:
            return  # its role is changing: the pass after that change looks at it again
        with self._own_failures(partition, "the controller step"):
            if rs is None:
                rs = await self._create(partition)
            await self._act(partition, replica, rs)

    @contextlib.contextmanager
    def _own_failures(self, partition: int, what: str) -> Iterator[None]:
        """One partition's step fails on its own: logged, and the next pass (or loop turn) tries again."""
        try:
            yield
        except CoordinationError as exc:
            # Someone else's write came first: the next pass sees it.
            log.info("partition %d: %s", partition, exc)
            self.wake()
        except SqsError as exc:
            log.warning("partition %d: %s failed: %s", partition, what, exc.__cause__ or exc)
        except Exception:
            log.exception("partition %d: %s failed", partition, what)

    def _change(self, partition: int, what: str, change: Callable[[], Awaitable[Any]]) -> None:
        """Run ``change`` as the partition's role change, unless one is under way."""
        if partition in self._changes:
            return
        task = asyncio.get_running_loop().create_task(self._run_change(partition, what, change))
        self._changes[partition] = task

    async def _run_change(self, partition: int, what: str, change: Callable[[], Awaitable[Any]]) -> None:
        try:
            await change()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("partition %d: %s failed", partition, what)
        finally:
            self._changes.pop(partition, None)
            self.wake()  # the next pass looks at the partition again soon

    def _stand_by(self, partition: int, replica: Replica, reason: str) -> None:
        if replica.term is None and replica.follower is None:
            return  # standing by already
        self._change(partition, "standing by", functools.partial(replica.stand_by, reason))

    async def _create(self, partition: int) -> ReplicaSet | None:
        try:
            rs = await self._call(self.sets.create, partition, self.cluster, [self.me], self.acks)
        except CoordinationError as exc:
            log.error("partition %d has a replica set outside cluster %s: %s", partition, self.cluster, exc)
            return None
        log.info("partition %d had no replica set: it is this worker's alone now", partition)
        return rs

    async def _act(self, partition: int, replica: Replica, rs: ReplicaSet | None) -> None:
        if getattr(replica, "refusing", False):
            # Its log is damaged and no replica could replace it: it neither claims nor follows (server.damage).
            return
        if rs is None or self.me not in rs.replicas:
            self._stand_by(partition, replica, "this worker holds no replica of it")
            return
        now, mono = self.now_ms(), self.mono_ms()
        leading = replica.leading_epoch
        if leading is not None and rs.leader == self.me and rs.epoch == leading:
            await self._keep_leading(partition, replica, rs, now, mono)
            return
        if leading is not None:
            self._stand_by(partition, replica, f"deposed: {rs.leader} leads epoch {rs.epoch}")
            self._stuck.pop(partition, None)
            return
        released = self._released.get(partition)
        if released is not None and rs.leader == self.me and mono - released < self.times.lease_ms:
            # Handed over: the preferred replica claims first; only if none does within a lease, claim back.
            return
        if may_claim(rs, self.me, now) and (
            (rs.leader == self.me and released is None)
            or now > rs.lease_until + self._rank(rs) * self.times.claim_stagger_ms
        ):
            claimed = await self._call(
                self.sets.claim,
                partition,
                self.me,
                rs.epoch,
                now,
                self.times.lease_ms,
                self.address,
                self.replication_address,
            )
            self._renewed[partition] = mono
            self._led_since[partition] = mono
            self._released.pop(partition, None)
            role = LeaderRole(
                replicas=claimed.replicas,
                isr=claimed.isr,
                acks=claimed.acks,
                epoch=claimed.epoch,
                answers_until_ms=answers_until(mono, self.times.lease_ms),
            )
            self._change(partition, f"leading epoch {claimed.epoch}", functools.partial(replica.lead, role))
            return
        source = rs.fetch_address
        if rs.leader == self.me or source is None:
            # Our own old claim (not in sync any more), or a leader that never claimed: nothing to follow.
            if replica.following is not None:
                self._stand_by(partition, replica, "no leader to follow")
            return
        wanted = (source, rs.epoch)
        follower = replica.follower
        if replica.following != wanted or (follower is not None and follower.failure is not None):
            role = FollowerRole(leader=source, epoch=rs.epoch)
            self._change(
                partition, f"following {rs.leader}", functools.partial(replica.follow, role, on_trouble=self.wake)
            )

    def _rank(self, rs: ReplicaSet) -> int:
        """How many in-sync replicas other than the leader come before this one in preference order."""
        ahead = [r for r in rs.replicas if r in rs.isr and r != rs.leader]
        return ahead.index(self.me) if self.me in ahead else len(ahead)

    async def _keep_leading(self, partition: int, replica: Replica, rs: ReplicaSet, now: int, mono: int) -> None:
        """``now``: wall time, for the item; ``mono``: monotonic, taken before the write is sent."""
        term = replica.term
        if term is not None and rs.replicas != term.stream.tracker.replicas:
            # The manager replaced a replica (the only change of the list, and fenced by this epoch).
            log.info("partition %d: replica set is now %s", partition, ",".join(rs.replicas))
            term.stream.set_replicas(rs.replicas)
        if term is not None and partition not in self._renewing and self._should_hand_over(partition, rs, term, mono):
            why = "this worker is leaving" if self.leaving else "its preferred replica"
            log.info("partition %d: handing leadership to %s (%s)", partition, rs.replicas[0], why)
            # Marked first: no renewal may follow the release and extend the lease again.
            self._released[partition] = mono
            try:
                await self._call(self.sets.release, partition, self.me, rs.epoch, now)
            except BaseException:
                self._released.pop(partition, None)
                raise
            self._stand_by(partition, replica, f"handed over to {rs.replicas[0]}")

    # --- renewals -------------------------------------------------------------------------------------------

    async def _renew_loop(self) -> None:
        """Renew each led partition's lease every third of it, each renewal a task of its own: it waits on
        nothing but its own write (no scan, no other partition, no role change)."""
        tick = min(self.times.poll_seconds, self.times.lease_ms / 6000)
        while True:
            await asyncio.sleep(tick)
            for partition, replica in list(self.replicas.items()):
                if partition not in self._renewing and self.renewal_due(partition, replica):
                    task = asyncio.get_running_loop().create_task(self._renew_lease(partition, replica))
                    self._renewing[partition] = task

    def renewal_due(self, partition: int, replica: Replica) -> bool:
        term = replica.term
        if term is None or term.ended or partition in self._changes or partition in self._released:
            return False
        renewed = self._renewed.get(partition)
        return renewed is None or self.mono_ms() - renewed >= self.times.lease_ms // 3

    async def _renew_lease(self, partition: int, replica: Replica) -> None:
        try:
            with self._own_failures(partition, "renewing the lease"):
                await self.renew_once(partition, replica)
        finally:
            self._renewing.pop(partition, None)

    async def renew_once(self, partition: int, replica: Replica) -> None:
        """Renew the lease of the term ``replica`` plays now, unless replies have been stuck for a whole lease
        (then it is let lapse, so that an in-sync follower that can still reach the others takes over)."""
        term = replica.term
        if term is None or term.ended:
            return
        mono = self.mono_ms()
        if self._stuck_for(partition, term, mono) > self.times.lease_ms:
            log.warning(
                "partition %d: nothing committed for %d ms with replies waiting; letting the lease lapse",
                partition,
                self._stuck_for(partition, term, mono),
            )
            return
        try:
            await self._call(self.sets.renew, partition, self.me, term.epoch, self.now_ms(), self.times.lease_ms)
        except CoordinationError:
            if replica.term is term:
                self._stand_by(partition, replica, "fenced while renewing its lease")
            raise
        self._renewed[partition] = mono
        if replica.term is term:
            term.extend_lease(answers_until(mono, self.times.lease_ms))

    def _should_hand_over(self, partition: int, rs: ReplicaSet, term: Any, mono: int) -> bool:
        """Leadership goes back to the preferred replica, so that it stays spread over the workers as
        placement laid it out, once that replica has been in sync and fully caught up for a while; from a
        leaving worker, as soon as it is in sync and caught up."""
        preferred = rs.replicas[0]
        if preferred == self.me or preferred not in rs.isr:
            return False
        if not self.leaving and (
            not self.times.handover_after_ms
            or mono - self._led_since.setdefault(partition, mono) < self.times.handover_after_ms
        ):
            return False
        stream = term.stream
        caught_up_at = stream.caught_up_at.get(preferred)
        # The stream times follower fetches on the same monotonic clock.
        recently = caught_up_at is not None and mono - caught_up_at < self.times.max_lag_ms
        return preferred in stream.tracker.isr and recently

    def _stuck_for(self, partition: int, term: Any, mono: int) -> int:
        tracker = term.stream.tracker
        if not tracker.waiting:
            self._stuck.pop(partition, None)
            return 0
        seen = self._stuck.get(partition)
        if seen is None or seen[0] != tracker.high_watermark:
            self._stuck[partition] = (tracker.high_watermark, mono)
            return 0
        return mono - seen[1]

    async def _check_isr(self, partition: int, replica: Replica) -> None:
        term = replica.term
        if term is None or term.ended:
            return
        stream = term.stream
        epoch = term.epoch
        lagging = stream.lagging(self.times.max_lag_ms)
        if lagging:
            log.warning("partition %d: %s left the in-sync set (lagging)", partition, ", ".join(sorted(lagging)))
            changed = await self._call(self.sets.shrink_isr, partition, self.me, epoch, lagging)
            if replica.term is term:
                stream.set_isr(changed.isr)
        joining = stream.caught_up()
        if joining:
            # Counted in the high watermark before the item says they are in sync, never after: from the
            # moment the write lands they may be elected, so nothing may be committed without them.
            before = stream.tracker.isr
            stream.set_isr(before | joining)
            try:
                changed = await self._call(self.sets.expand_isr, partition, self.me, epoch, joining)
            except BaseException:
                if replica.term is term:
                    stream.set_isr(before)
                raise
            log.info("partition %d: %s back in the in-sync set", partition, ", ".join(sorted(joining)))
            if replica.term is term:
                stream.set_isr(changed.isr)
