"""The cluster controller's leases against a real DynamoDB API (the durable stand-in), driving an in-process
worker on a clock the test moves: local deadlines follow the monotonic clock, whatever the wall clock does."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from ferrymq.aws.replica_sets import ReplicaSets
from ferrymq.clock import Clock, ManualClock, SystemClock
from ferrymq.errors import NotLeader, ServiceUnavailable
from ferrymq.replication_rules import Acks, ReplicaSet, answers_until
from ferrymq.rpc.client import WorkerClient
from ferrymq.settings import Settings
from ferrymq.storage.replication.controller import ClusterController, ControllerTimes
from ferrymq.storage.replication.roles import FollowerRole, LeaderRole
from ferrymq.storage.server import StorageWorker, WorkerConfig
from tests.functional.storage_workers.worker_calls import RETENTION, eventually
from tests.support.engine_requests import RECEIPT_KEY

LEASE_MS = 5_000


def unique_partitions(n: int) -> tuple[int, ...]:
    """Partition numbers no other test uses, in a table other tests share."""
    base = 2_000_000 + uuid.uuid4().int % 1_000_000_000
    return tuple(range(base, base + n))


class GatedReplica:
    """A replica whose next lead waits until the test opens the gate: a role change that takes long (a log
    replay, a reconciliation), injected."""

    def __init__(self, replica: Any) -> None:
        self._replica = replica
        self.gate = asyncio.Event()
        self.waiting = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._replica, name)

    async def lead(self, role: LeaderRole) -> None:
        self.waiting = True
        await self.gate.wait()
        self.waiting = False
        await self._replica.lead(role)


def gate(partition: int) -> tuple[dict[int, GatedReplica], Callable[[dict[int, Any]], dict[int, Any]]]:
    """A ``wrap`` for :func:`controlled_worker` standing a :class:`GatedReplica` in for ``partition``'s replica,
    and where to find it."""
    gated: dict[int, GatedReplica] = {}

    def wrap(replicas: dict[int, Any]) -> dict[int, Any]:
        gated[partition] = GatedReplica(replicas[partition])
        return {**replicas, partition: gated[partition]}

    return gated, wrap


@asynccontextmanager
async def controlled_worker(
    tmp_path: Path,
    settings: Settings,
    partitions: tuple[int, ...],
    clock: Clock,
    *,
    times: ControllerTimes | None = None,
    wrap: Callable[[dict[int, Any]], dict[int, Any]] = lambda replicas: replicas,
    sets: Any = None,
) -> AsyncIterator[tuple[StorageWorker, ClusterController, WorkerClient]]:
    """Worker "a" alone in a cluster of its own, serving ``partitions``, and its controller (not started: the
    test polls it or starts it); ``wrap`` may stand wrappers in for its replicas, ``sets`` for its replica sets."""
    worker = StorageWorker(
        WorkerConfig(data_dir=tmp_path, partitions=partitions, port=0, register=False, worker_id="a"),
        dict.fromkeys(partitions, RECEIPT_KEY),
        clock=clock,
    )
    address = await worker.start(static_roles=False)
    controller = ClusterController(
        "a",
        f"cluster-{uuid.uuid4().hex[:8]}",
        wrap(dict(worker.replicas)),
        address,
        sets or ReplicaSets.from_settings(settings),
        None,
        acks=Acks.LEADER,
        # A slow cadence shorter than the lease: the tests move the clock by one and expect the lease to live.
        times=times or ControllerTimes(lease_ms=LEASE_MS, steady_poll_seconds=2.0, handover_after_ms=0),
        clock=clock,
    )
    client = WorkerClient(*address, connect_timeout=1.0)
    try:
        yield worker, controller, client
    finally:
        await client.close()
        await controller.close()
        await worker.close()


async def answers(client: WorkerClient, partition: int) -> bool:
    """Whether the worker answers a request on ``partition`` (a count: it writes nothing)."""
    try:
        await client.stats(partition, "q", retention_seconds=RETENTION)
    except NotLeader:
        return False
    return True


def test_a_wall_clock_stepped_back_does_not_let_a_leader_answer_past_its_lease(
    tmp_path: Path, aws_settings: Settings
) -> None:
    async def scenario() -> None:
        clock = ManualClock()
        (p,) = unique_partitions(1)
        async with controlled_worker(tmp_path, aws_settings, (p,), clock) as (worker, controller, client):
            # given worker a claimed partition p (its replica set is created with a alone) and answers on it
            await controller.poll_once()
            assert worker.replicas[p].leading_epoch is not None
            assert await answers(client, p)
            # when a whole lease passes without a renewal while NTP steps the wall clock back a minute
            clock.advance(LEASE_MS / 1000)
            clock.step_wall(-60)
            # then the leader no longer answers: its window is on the monotonic clock, which the step did not move
            assert not await answers(client, p)
            # and a renewal is due (the cadence is monotonic too); once made, it answers again
            actor = controller.actors[p]
            assert actor.renewal_due()
            await actor.renew_once()
            assert await answers(client, p)
            assert worker.replicas[p].term.answers_until_ms == answers_until(
                int(clock.monotonic() * 1000), LEASE_MS
            )

    asyncio.run(scenario())


def test_a_wall_clock_stepped_forward_does_not_cut_a_leaders_window_short(
    tmp_path: Path, aws_settings: Settings
) -> None:
    async def scenario() -> None:
        clock = ManualClock()
        (p,) = unique_partitions(1)
        async with controlled_worker(tmp_path, aws_settings, (p,), clock) as (_, controller, client):
            # given worker a leads partition p
            await controller.poll_once()
            # when the wall clock jumps a minute ahead, half a lease after the claim
            clock.advance(LEASE_MS / 2000)
            clock.step_wall(60)
            # then the leader still answers until its lease, less the allowance, has passed on its own clock
            assert await answers(client, p)
            clock.advance(LEASE_MS / 2000)
            assert not await answers(client, p)

    asyncio.run(scenario())


def test_a_partition_whose_role_change_hangs_does_not_hold_up_another_partitions_renewals(
    tmp_path: Path, aws_settings: Settings
) -> None:
    async def scenario() -> None:
        p, q = unique_partitions(2)
        gated, gate_p = gate(p)

        # given worker a's controller running on short leases, partition p's role change to leader hanging
        times = ControllerTimes(lease_ms=1_500, poll_seconds=0.1, handover_after_ms=0)
        async with controlled_worker(tmp_path, aws_settings, (p, q), SystemClock(), times=times, wrap=gate_p) as (
            worker, controller, _,
        ):
            controller.start()
            # when the controller claims both partitions
            leases: set[int] = set()

            async def q_renewed_three_times() -> bool:
                for rs in await asyncio.to_thread(controller.sets.all, controller.cluster):
                    if rs.partition == q and rs.leader == "a":
                        leases.add(rs.lease_until)
                return len(leases) >= 4

            # then q is led and its lease renewed again and again while p's change still hangs
            await eventually(q_renewed_three_times, timeout=15)
            assert worker.replicas[q].leading_epoch is not None
            assert gated[p].waiting and worker.replicas[p].leading_epoch is None
            # and once p's change ends, p is led too
            gated[p].gate.set()

            async def p_led() -> bool:
                return worker.replicas[p].leading_epoch is not None

            await eventually(p_led, timeout=15)

    asyncio.run(scenario())


class StalledScans:
    """Replica sets whose scans hang once ``stall`` is set (a DynamoDB endpoint that stopped answering reads)."""

    def __init__(self, sets: ReplicaSets) -> None:
        self._sets = sets
        self.stall = threading.Event()
        self.release = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sets, name)

    def all(self, cluster: str | None = None) -> list[ReplicaSet]:
        if self.stall.is_set():
            self.release.wait(30)
        return self._sets.all(cluster)


def test_a_hanging_scan_does_not_hold_up_lease_renewals(tmp_path: Path, aws_settings: Settings) -> None:
    async def scenario() -> None:
        (p,) = unique_partitions(1)
        times = ControllerTimes(lease_ms=1_500, poll_seconds=0.1, handover_after_ms=0)
        async with controlled_worker(tmp_path, aws_settings, (p,), SystemClock(), times=times) as (
            worker, controller, _,
        ):
            # given worker a leads p, its controller running
            sets = controller.sets
            stalled = controller.sets = StalledScans(sets)  # type: ignore[assignment]
            await controller.poll_once()
            controller.start()
            # when reads of the replica sets stop being answered
            stalled.stall.set()
            leases: set[int] = set()

            async def renewed_three_times() -> bool:
                rs = await asyncio.to_thread(sets.get, p)
                assert rs is not None and rs.leader == "a"
                leases.add(rs.lease_until)
                return len(leases) >= 4

            # then its lease is still renewed again and again, and it goes on leading
            try:
                await eventually(renewed_three_times, timeout=15)
                assert worker.replicas[p].leading_epoch is not None
            finally:
                stalled.release.set()

    asyncio.run(scenario())


class FirstClaimTimesOut:
    """Replica sets whose first claim fails as a coordination call that timed out would."""

    def __init__(self, sets: ReplicaSets) -> None:
        self._sets = sets
        self.failed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sets, name)

    def claim(self, *args: Any, **kwargs: Any) -> ReplicaSet:
        if not self.failed:
            self.failed += 1
            raise ServiceUnavailable("Read timeout on endpoint URL")
        return self._sets.claim(*args, **kwargs)


def test_a_worker_whose_first_claim_fails_at_start_up_claims_again_before_it_says_it_is_ready(
    tmp_path: Path, aws_settings: Settings
) -> None:
    async def scenario() -> None:
        (p,) = unique_partitions(1)
        sets = FirstClaimTimesOut(ReplicaSets.from_settings(aws_settings))
        async with controlled_worker(tmp_path, aws_settings, (p,), SystemClock(), sets=sets) as (
            worker, controller, client
        ):
            # when it starts up and its first claim of partition p fails (a slow coordination call)
            await controller.start_up(within_seconds=10)
            # then it claimed again before start-up ended: it leads and answers, as a ready worker must
            assert sets.failed == 1
            assert worker.replicas[p].leading_epoch is not None
            assert await answers(client, p)
            assert controller.leaderless() == []

    asyncio.run(scenario())


def test_a_worker_leading_all_it_holds_is_steady_until_a_change_is_under_way_or_its_lease_lapses(
    tmp_path: Path, aws_settings: Settings
) -> None:
    async def scenario() -> None:
        clock = ManualClock()
        (p,) = unique_partitions(1)
        gated, gate_p = gate(p)

        async with controlled_worker(tmp_path, aws_settings, (p,), clock, wrap=gate_p) as (worker, controller, _):
            # given a worker that scanned once and whose claim of p is still becoming a lead
            assert not controller.steady(), "nothing scanned yet"
            passing = asyncio.get_running_loop().create_task(controller.poll_once())
            while not gated[p].waiting:
                await asyncio.sleep(0.01)
            # then it is not steady while the role change is under way: the next scan comes at the quick cadence
            assert not controller.steady()
            gated[p].gate.set()
            await passing
            await controller.poll_once()  # the first scan was made before p's replica set was created
            # and once it leads p under a live lease, and the wake its role change ended with is a slow cadence
            # old, it is steady: scans may come at the slow cadence
            assert worker.replicas[p].leading_epoch is not None
            assert not controller.steady()
            clock.advance(controller.times.steady_poll_seconds)
            assert controller.steady()
            # when the lease read by the last scan lapses (no renewal ran: the loops are not started)
            clock.advance(LEASE_MS / 1000)
            # then it is not steady: a lapsed lease is a claim to make, at the quick cadence
            assert not controller.steady()

    asyncio.run(scenario())


def test_a_follower_in_trouble_is_not_steady(tmp_path: Path, aws_settings: Settings) -> None:
    async def scenario() -> None:
        clock = ManualClock()
        (p,) = unique_partitions(1)
        async with controlled_worker(tmp_path, aws_settings, (p,), clock) as (worker, controller, _):
            # given a worker leading p, steady once the wake its role change ended with is a slow cadence old
            await controller.poll_once()
            await controller.poll_once()
            clock.advance(controller.times.steady_poll_seconds)
            assert controller.steady()
            # when it follows a leader that is not there (as if deposed) and its first request to it fails
            troubled = asyncio.Event()

            def trouble() -> None:
                controller.wake()
                troubled.set()

            await worker.replicas[p].stand_by("test")
            await worker.replicas[p].follow(FollowerRole(leader=("127.0.0.1", 1), epoch=99), on_trouble=trouble)
            await asyncio.wait_for(troubled.wait(), 10)
            # then it is not steady: its scans stay at the quick cadence while the trouble lasts
            assert not controller.steady()

    asyncio.run(scenario())


def test_a_leader_that_is_not_its_partitions_preferred_replica_is_not_steady_while_handovers_are_on(
    tmp_path: Path, aws_settings: Settings
) -> None:
    async def scenario(handover_after_ms: int) -> bool:
        clock = ManualClock()
        (p,) = unique_partitions(1)
        times = ControllerTimes(lease_ms=LEASE_MS, steady_poll_seconds=2.0, handover_after_ms=handover_after_ms)
        async with controlled_worker(tmp_path / str(handover_after_ms), aws_settings, (p,), clock, times=times) as (
            worker, controller, _,
        ):
            # given a replica set preferring worker b, which never started, so that worker a claims and leads
            await asyncio.to_thread(controller.sets.create, p, controller.cluster, ["b", "a"], Acks.LEADER)
            clock.advance(1)
            await controller.poll_once()
            await controller.poll_once()
            assert worker.replicas[p].leading_epoch is not None
            clock.advance(controller.times.steady_poll_seconds)
            return controller.steady()

    # then it keeps the quick cadence while a handover back to b may come due, and only then
    assert not asyncio.run(scenario(10_000))
    assert asyncio.run(scenario(0))


def test_a_scan_never_waits_for_a_role_change_and_the_actor_plays_only_a_scan_begun_after_it(
    tmp_path: Path, aws_settings: Settings
) -> None:
    async def scenario() -> None:
        clock = ManualClock()
        (p,) = unique_partitions(1)
        gated, gate_p = gate(p)

        async with controlled_worker(tmp_path, aws_settings, (p,), clock, wrap=gate_p) as (worker, controller, _):
            # given a worker whose first scan made it claim p, and whose change to leading hangs
            await controller.scan()
            while not gated[p].waiting:
                await asyncio.sleep(0.01)
            actor = controller.actors[p]
            assert actor.changing is not None and actor.changing.startswith("leading epoch")
            # when two more scans are made meanwhile
            await asyncio.wait_for(controller.scan(), 10)
            await asyncio.wait_for(controller.scan(), 10)
            # then each returned without waiting for the change, which still hangs
            assert gated[p].waiting and actor.changing is not None
            # and once the change ends, neither is played: both began before it ended, so may not show its claim
            gated[p].gate.set()
            await controller.settled()
            assert worker.replicas[p].leading_epoch is not None
            assert actor.played_scan == 1
            # and the next scan, begun after, is played, and the worker goes on leading
            await controller.poll_once()
            assert actor.played_scan == controller.scans_begun == 4
            assert worker.replicas[p].leading_epoch is not None

    asyncio.run(scenario())
