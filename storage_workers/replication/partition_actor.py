"""One hosted partition's owner in the cluster: its role, its lease and its in-sync set.

The controller (:mod:`.controller`) only reads DynamoDB: each scan's replica set for the partition is *posted*
to the partition's :class:`PartitionActor`, which plays it in a task of its own. What the actor does with it:

- **leading in the item's epoch**: keeps leading (a replica list the manager changed is taken, and leadership is
  handed back to the preferred replica when due: :meth:`PartitionActor._keep_leading`);
- **leading an older epoch**: deposed (a paused leader waking up): steps down at once;
- **may claim** (in sync, and the leader's lease lapsed, or the item names this worker leader: a restart):
  claims the next epoch, publishing its address, and leads. In-sync replicas wait their rank in the replica list
  times ``claim_stagger_ms`` after the lease ends, so the preferred one usually wins without a race; a race is
  settled by the conditional write anyway;
- **otherwise**: follows the item's leader in the item's epoch (reconciling its log first).

The mailbox keeps only the newest post: a replica set is a desired state, not a command, so an older one is never
worth playing. Role changes (lead, follow, stand by) run in the actor's task, so there is never more than one at a
time, and a post made while one runs waits for it. A scan that began before the actor's last write or role change
ended may not show it (a claim it read the item before), so such a post is dropped and a fresh scan asked for.

Beside the mailbox, two loops of the actor's own run on the monotonic clock while the replica leads, whatever its
role change is doing (they sleep otherwise: a follower's worker does not wake for them):

- **the lease**: renewed every third of it while leading, each renewal a write that waits on nothing else, unless
  replies have been stuck for a whole lease (then it is let lapse, so that an in-sync follower that can still
  reach the others takes over). A renewal that finds itself fenced asks the actor to stand by;
- **the in-sync set**: every ``isr_check_seconds``, followers lagging past ``max_lag_ms`` leave it and caught-up
  ones join it again (``LeaderStream.lagging``/``caught_up``). The commit tracker's set is always a superset of
  the item's: a follower leaves it only after the item's conditional write dropped it, and joins it before the
  write that adds it is sent (Kafka's "maximal ISR"), so that nothing is committed without a replica that may be
  elected. The leader is the only writer of its epoch's set, so it never takes the set back from a read of the
  item, which may be older than its own last write.

So one partition's slow rebuild, hanging coordination write or stuck role change never delays another's lease,
and a slow scan delays none. Safety never depends on this timing: a claim is fenced by the epoch it read, the
in-sync set only changes through the leader's epoch-fenced writes, and every replication request carries the epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from ferrymq.aws.replica_sets import CoordinationError, ReplicaSets
from ferrymq.errors import SqsError
from ferrymq.replication_rules import Acks, ReplicaSet, answers_until, may_claim
from ferrymq.storage.replication.roles import FollowerRole, LeaderRole

if TYPE_CHECKING:
    from ferrymq.storage.replication.controller import ControllerTimes

log = logging.getLogger(__name__)


class Replica(Protocol):
    """What an actor plays roles on: :class:`ferrymq.storage.server.replica.PartitionReplica`."""

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


class Coordinator(Protocol):
    """What an actor asks of its controller (:class:`~.controller.ClusterController`)."""

    me: str
    cluster: str
    sets: ReplicaSets
    acks: Acks
    times: ControllerTimes
    address: tuple[str, int]
    replication_address: tuple[str, int] | None
    leaving: bool
    scans_begun: int
    """How many scans of the replica sets have begun: a post carries its scan's number."""

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a blocking coordination call on the coordination threads."""
        ...

    def now_ms(self) -> int: ...

    def mono_ms(self) -> int: ...

    def wake(self) -> None:
        """Scan again soon."""
        ...


class PartitionActor:
    def __init__(self, partition: int, replica: Replica, coordinator: Coordinator) -> None:
        self.partition = partition
        self.replica = replica
        self._c = coordinator
        self.changing: str | None = None
        """The role change under way, named; None when there is none."""
        self.played_scan = 0
        """The newest scan this actor played (0: none yet)."""
        self._posted: tuple[ReplicaSet | None, int] | None = None
        """The newest post not yet played: the scan's replica set (None: it found none) and the scan's number."""
        self._stand_by_asked: tuple[str, Any] | None = None
        """A fenced renewal's request: why, and the term it was fenced in."""
        self._fresh_after = 0
        """Posts of scans begun up to this number may predate the actor's last write or role change."""
        self._mail = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._leading = asyncio.Event()
        """Set while the replica leads (as of the last role change): the lease and in-sync set loops wait on it
        otherwise, so a follower's worker does not wake for them."""
        # Local times below are monotonic ms.
        self._renewed: int | None = None
        """When the write of the last claim or renewal was sent."""
        self._renewal: asyncio.Task[None] | None = None
        """The renewal under way (cancelled with the actor)."""
        self._stuck: tuple[int, int] | None = None
        """The high watermark last seen with replies waiting, and since when."""
        self._led_since: int | None = None
        self._released: int | None = None
        """When this worker handed the partition over: it leaves the next claim to the others for a while."""
        self._tasks: list[asyncio.Task[None]] = []

    def __repr__(self) -> str:
        return f"PartitionActor({self.partition}, changing={self.changing!r})"

    # --- running ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the mailbox loop. The lease and in-sync set loops start with :meth:`start_loops`: a worker
        starting up plays its first scans before any of its periodic work begins."""
        if not self._tasks:
            self._tasks.append(asyncio.get_running_loop().create_task(self._play_loop()))

    def start_loops(self) -> None:
        self.start()
        if len(self._tasks) == 1:
            loop = asyncio.get_running_loop()
            self._tasks += [loop.create_task(self._renew_loop()), loop.create_task(self._isr_loop())]

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        if self._renewal is not None:
            tasks.append(self._renewal)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def post(self, rs: ReplicaSet | None, scan: int) -> None:
        """What scan number ``scan`` found for this partition (None: no replica set); only the newest is kept."""
        self._posted = (rs, scan)
        self._idle.clear()
        self._mail.set()

    def ask_to_stand_by(self, reason: str, term: Any) -> None:
        """Stand by, unless the role changed since ``term`` (which was fenced)."""
        self._stand_by_asked = (reason, term)
        self._idle.clear()
        self._mail.set()

    async def played(self) -> None:
        """Return once every post so far is played (or dropped) and no role change is under way."""
        await self._idle.wait()

    @property
    def busy(self) -> bool:
        return not self._idle.is_set()

    async def _play_loop(self) -> None:
        while True:
            await self._mail.wait()
            self._mail.clear()
            asked, self._stand_by_asked = self._stand_by_asked, None
            if asked is not None and self.replica.term is asked[1]:
                await self._stand_by(asked[0])
            posted, self._posted = self._posted, None
            if posted is not None:
                await self._play(*posted)
            if not self._mail.is_set():
                self._idle.set()

    async def _play(self, rs: ReplicaSet | None, scan: int) -> None:
        if scan <= self._fresh_after:
            # The scan may have read the item before this actor's own last write: a fresh one decides.
            self._c.wake()
            return
        self.played_scan = scan
        with self._own_failures("the controller step"):
            if rs is None:
                rs = await self._create()
            await self._act(rs)

    @contextlib.contextmanager
    def _own_failures(self, what: str) -> Iterator[None]:
        """A step fails on its own: logged, and the next scan (or loop turn) tries again."""
        try:
            yield
        except CoordinationError as exc:
            # Someone else's write came first: the next scan sees it.
            log.info("partition %d: %s", self.partition, exc)
            self._written()
        except SqsError as exc:
            log.warning("partition %d: %s failed: %s", self.partition, what, exc.__cause__ or exc)
        except Exception:
            log.exception("partition %d: %s failed", self.partition, what)

    def _written(self) -> None:
        """This actor wrote the item, or its role changed: scans begun until now may not show it."""
        self._fresh_after = self._c.scans_begun
        self._c.wake()

    async def _change(self, what: str, change: Callable[[], Awaitable[Any]]) -> None:
        """Run a role change; the next scan after it looks at the partition again."""
        self.changing = what
        try:
            await change()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("partition %d: %s failed", self.partition, what)
        finally:
            self.changing = None
            if self.replica.term is None:
                self._leading.clear()
            else:
                self._leading.set()
            self._written()

    async def _stand_by(self, reason: str) -> None:
        replica = self.replica
        if replica.term is None and replica.follower is None:
            return  # standing by already
        await self._change("standing by", lambda: replica.stand_by(reason))

    # --- playing a replica set ----------------------------------------------------------------------------

    async def _create(self) -> ReplicaSet | None:
        c = self._c
        try:
            rs = await c.call(c.sets.create, self.partition, c.cluster, [c.me], c.acks)
        except CoordinationError as exc:
            log.error("partition %d has a replica set outside cluster %s: %s", self.partition, c.cluster, exc)
            return None
        log.info("partition %d had no replica set: it is this worker's alone now", self.partition)
        self._written()
        return rs

    async def _act(self, rs: ReplicaSet | None) -> None:
        c, replica, partition = self._c, self.replica, self.partition
        if getattr(replica, "refusing", False):
            # Its log is damaged and no replica could replace it: it neither claims nor follows (server.damage).
            return
        if rs is None or c.me not in rs.replicas:
            await self._stand_by("this worker holds no replica of it")
            return
        now, mono = c.now_ms(), c.mono_ms()
        leading = replica.leading_epoch
        if leading is not None and rs.leader == c.me and rs.epoch == leading:
            await self._keep_leading(rs, now, mono)
            return
        if leading is not None:
            self._stuck = None
            await self._stand_by(f"deposed: {rs.leader} leads epoch {rs.epoch}")
            return
        released = self._released
        if released is not None and rs.leader == c.me and mono - released < c.times.lease_ms:
            # Handed over: the preferred replica claims first; only if none does within a lease, claim back.
            return
        if may_claim(rs, c.me, now) and (
            (rs.leader == c.me and released is None)
            or now > rs.lease_until + self._rank(rs) * c.times.claim_stagger_ms
        ):
            claimed = await c.call(
                c.sets.claim, partition, c.me, rs.epoch, now, c.times.lease_ms, c.address, c.replication_address
            )
            self._renewed = self._led_since = mono
            self._released = None
            role = LeaderRole(
                replicas=claimed.replicas,
                isr=claimed.isr,
                acks=claimed.acks,
                epoch=claimed.epoch,
                answers_until_ms=answers_until(mono, c.times.lease_ms),
            )
            await self._change(f"leading epoch {claimed.epoch}", lambda: replica.lead(role))
            return
        source = rs.fetch_address
        if rs.leader == c.me or source is None:
            # Our own old claim (not in sync any more), or a leader that never claimed: nothing to follow.
            if replica.following is not None:
                await self._stand_by("no leader to follow")
            return
        wanted = (source, rs.epoch)
        follower = replica.follower
        if replica.following != wanted or (follower is not None and follower.failure is not None):
            following = FollowerRole(leader=source, epoch=rs.epoch)
            await self._change(f"following {rs.leader}", lambda: replica.follow(following, on_trouble=c.wake))

    def _rank(self, rs: ReplicaSet) -> int:
        """How many in-sync replicas other than the leader come before this one in preference order."""
        me = self._c.me
        ahead = [r for r in rs.replicas if r in rs.isr and r != rs.leader]
        return ahead.index(me) if me in ahead else len(ahead)

    async def _keep_leading(self, rs: ReplicaSet, now: int, mono: int) -> None:
        """``now``: wall time, for the item; ``mono``: monotonic, taken before the write is sent."""
        c, term = self._c, self.replica.term
        if term is not None and rs.replicas != term.stream.tracker.replicas:
            # The manager replaced a replica (the only change of the list, and fenced by this epoch).
            log.info("partition %d: replica set is now %s", self.partition, ",".join(rs.replicas))
            term.stream.set_replicas(rs.replicas)
        if term is not None and not self._renewing and self._should_hand_over(rs, term, mono):
            why = "this worker is leaving" if c.leaving else "its preferred replica"
            log.info("partition %d: handing leadership to %s (%s)", self.partition, rs.replicas[0], why)
            # Marked first: no renewal may follow the release and extend the lease again.
            self._released = mono
            # The lease still fences any other claim while the replies the term holds are answered.
            await term.drain(f"handed over to {rs.replicas[0]}")
            try:
                await c.call(c.sets.release, self.partition, c.me, rs.epoch, now)
            except BaseException:
                self._released = None
                term.resume()
                raise
            await self._stand_by(f"handed over to {rs.replicas[0]}")

    def _should_hand_over(self, rs: ReplicaSet, term: Any, mono: int) -> bool:
        """Leadership goes back to the preferred replica, so that it stays spread over the workers as
        placement laid it out, once that replica has been in sync and fully caught up for a while; from a
        leaving worker, as soon as it is in sync and caught up."""
        c = self._c
        preferred = rs.replicas[0]
        if preferred == c.me or preferred not in rs.isr:
            return False
        if self._led_since is None:
            self._led_since = mono
        if not c.leaving and (
            not c.times.handover_after_ms or mono - self._led_since < c.times.handover_after_ms
        ):
            return False
        stream = term.stream
        caught_up_at = stream.caught_up_at.get(preferred)
        # The stream times follower fetches on the same monotonic clock.
        recently = caught_up_at is not None and mono - caught_up_at < c.times.max_lag_ms
        return preferred in stream.tracker.isr and recently

    # --- the lease ----------------------------------------------------------------------------------------

    async def _tick(self, seconds: float) -> None:
        """Sleep ``seconds``, then on until the replica leads."""
        await asyncio.sleep(seconds)
        if self.replica.term is None:
            await self._leading.wait()

    async def _renew_loop(self) -> None:
        times = self._c.times
        tick = min(times.poll_seconds, times.lease_ms / 6000)
        while True:
            await self._tick(tick)
            if not self._renewing and self.renewal_due():
                # A task of its own: a renewal's write never waits for the loop's next tick, nor it for the write.
                self._renewal = asyncio.get_running_loop().create_task(self._renew())

    @property
    def _renewing(self) -> bool:
        return self._renewal is not None and not self._renewal.done()

    def renewal_due(self) -> bool:
        term = self.replica.term
        if term is None or term.ended or self.changing is not None or self._released is not None:
            return False
        renewed = self._renewed
        return renewed is None or self._c.mono_ms() - renewed >= self._c.times.lease_ms // 3

    async def _renew(self) -> None:
        with self._own_failures("renewing the lease"):
            await self.renew_once()

    async def renew_once(self) -> None:
        """Renew the lease of the term the replica plays now, unless replies have been stuck for a whole lease
        (then it is let lapse, so that an in-sync follower that can still reach the others takes over)."""
        c, replica = self._c, self.replica
        term = replica.term
        if term is None or term.ended:
            return
        mono = c.mono_ms()
        stuck = self._stuck_for(term, mono)
        if stuck > c.times.lease_ms:
            log.warning("partition %d: nothing committed for %d ms with replies waiting; letting the lease lapse",
                        self.partition, stuck)
            return
        try:
            await c.call(c.sets.renew, self.partition, c.me, term.epoch, c.now_ms(), c.times.lease_ms)
        except CoordinationError:
            if replica.term is term:
                self.ask_to_stand_by("fenced while renewing its lease", term)
            raise
        self._renewed = mono
        if replica.term is term:
            term.extend_lease(answers_until(mono, c.times.lease_ms))

    def _stuck_for(self, term: Any, mono: int) -> int:
        tracker = term.stream.tracker
        if not tracker.waiting:
            self._stuck = None
            return 0
        seen = self._stuck
        if seen is None or seen[0] != tracker.high_watermark:
            self._stuck = (tracker.high_watermark, mono)
            return 0
        return mono - seen[1]

    # --- the in-sync set ----------------------------------------------------------------------------------

    async def _isr_loop(self) -> None:
        while True:
            await self._tick(self._c.times.isr_check_seconds)
            with self._own_failures("the in-sync set check"):
                await self.check_isr()

    async def check_isr(self) -> None:
        c, replica = self._c, self.replica
        term = replica.term
        if term is None or term.ended:
            return
        stream, epoch = term.stream, term.epoch
        lagging = stream.lagging(c.times.max_lag_ms)
        if lagging:
            log.warning("partition %d: %s left the in-sync set (lagging)", self.partition, ", ".join(sorted(lagging)))
            changed = await c.call(c.sets.shrink_isr, self.partition, c.me, epoch, lagging)
            if replica.term is term:
                stream.set_isr(changed.isr)
        joining = stream.caught_up()
        if joining:
            # Counted in the high watermark before the item says they are in sync, never after: from the
            # moment the write lands they may be elected, so nothing may be committed without them.
            before = stream.tracker.isr
            stream.set_isr(before | joining)
            try:
                changed = await c.call(c.sets.expand_isr, self.partition, c.me, epoch, joining)
            except BaseException:
                if replica.term is term:
                    stream.set_isr(before)
                raise
            log.info("partition %d: %s back in the in-sync set", self.partition, ", ".join(sorted(joining)))
            if replica.term is term:
                stream.set_isr(changed.isr)
