"""Changing who holds a cluster's replicas: ``ferrymq cluster add-worker`` and ``ferrymq cluster remove-worker``.

Both move a replica the same way (:func:`_move_replica`): the partition's replica list is widened by the worker
that takes the replica (it briefly has one replica more), the command waits until the leader has taken that
worker into the in-sync set, and only then drops the replica it replaces. No partition ever has fewer in-sync
replicas than before, and every step is one conditional write of :class:`~ferrymq.aws.replica_sets.ReplicaSets`
(a write made against a stale read is refused, never applied).

Removing a worker: it is marked leaving in the worker registry first, so the in-cluster manager places nothing
on it any more and it hands over, at once, the leadership of every partition whose preferred (first) replica
is another in-sync one. Each of its partitions is then reordered so that it comes last (an in-sync replica
first where it leads), its leadership waited away from it, and its replica moved to the worker
:func:`ferrymq.placement.without_worker` chose, at the rank it had, so preferred leadership stays spread.
Refusals (unknown worker, too few workers left, a replica with nowhere to go, a leadership that cannot move)
come before anything changes; a failure midway leaves every partition with all its replicas, and running the
command again carries on from where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ferrymq.aws.replica_sets import Fenced, LeaderMustStay, ReplicaSets
from ferrymq.aws.workers import WorkerRegistry, WorkerState
from ferrymq.placement import CannotMove, with_new_worker, without_worker
from ferrymq.replication_rules import ReplicaSet
from ferrymq.settings import Settings

POLL_SECONDS = 0.25


class MembershipChangeFailed(Exception):
    """A worker could not be added or removed; the message says what stands and what to do."""


class MembershipChangeRefused(MembershipChangeFailed):
    """Refused before anything changed."""


# --- adding a worker ------------------------------------------------------------------------------------------


def add_worker(settings: Settings, worker_id: str, cluster: str, *, catch_up_seconds: float = 120.0,
               say: Callable[[str], None] = print) -> dict[int, tuple[str, ...]]:
    """Move a fair share of the cluster's replicas to ``worker_id`` (a live worker of the cluster, holding
    nothing yet): the fewest moves that leave every worker within one replica of the others
    (:func:`ferrymq.placement.with_new_worker`), never a partition's current leader. A worker removed before
    is taken back (no longer leaving). Returns the moved partitions' new replica lists.
    """
    registry = WorkerRegistry.from_settings(settings)
    alive, _ = registry.members(cluster, int(time.time() * 1000), int(settings.worker_grace_seconds * 1000))
    joining = next((w for w in alive if w.worker_id == worker_id), None)
    if joining is None:
        raise MembershipChangeRefused(
            f"worker {worker_id} is not alive in cluster {cluster}: start it first, holding nothing "
            f"(python -m ferrymq.storage --partitions '' --worker-id {worker_id} --cluster {cluster})"
        )
    sets = ReplicaSets.from_settings(settings)
    current = {rs.partition: rs for rs in sets.all(cluster)}
    if any(worker_id in rs.replicas for rs in current.values()):
        raise MembershipChangeRefused(f"worker {worker_id} already holds replicas in cluster {cluster}")
    if joining.state is WorkerState.LEAVING:
        registry.set_state(cluster, worker_id, WorkerState.SERVING)
    plan = with_new_worker(
        {p: rs.replicas for p, rs in current.items()}, worker_id, pinned={p: rs.leader for p, rs in current.items()}
    )
    moved: dict[int, tuple[str, ...]] = {}
    for partition, target in sorted(plan.items()):
        if target == current[partition].replicas:
            continue
        moved[partition] = _move_replica(sets, current[partition], target, worker_id, catch_up_seconds).replicas
        say(f"partition {partition}: {','.join(current[partition].replicas)} -> {','.join(moved[partition])}")
    return moved


# --- removing a worker ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Removal:
    """What removing ``worker_id`` from ``cluster`` will do: each of its partitions' replica list before and
    after (its replica replaced in place), and the partitions it leads."""

    worker_id: str
    cluster: str
    moves: dict[int, tuple[tuple[str, ...], tuple[str, ...]]]
    leads: tuple[int, ...]

    def describe(self) -> list[str]:
        lines = [f"worker {self.worker_id} of cluster {self.cluster} holds {len(self.moves)} replica(s)"]
        for partition, (before, after) in sorted(self.moves.items()):
            taker = _newcomer(before, after)
            led = ", leading it: leadership moves first" if partition in self.leads else ""
            lines.append(f"  partition {partition}: its replica goes to {taker}{led}")
        return lines


def plan_removal(settings: Settings, worker_id: str, cluster: str) -> Removal:
    """The removal of ``worker_id``, or :class:`MembershipChangeRefused` saying why it cannot be done. Reads
    only."""
    registry = WorkerRegistry.from_settings(settings)
    alive, dead = registry.members(cluster, int(time.time() * 1000), int(settings.worker_grace_seconds * 1000))
    sets = ReplicaSets.from_settings(settings).all(cluster)
    held = [rs for rs in sets if worker_id in rs.replicas]
    if not held and worker_id not in {w.worker_id for w in [*alive, *dead]}:
        raise MembershipChangeRefused(f"worker {worker_id} is unknown in cluster {cluster}")
    if not held:
        return Removal(worker_id, cluster, {}, ())
    stay = [w.worker_id for w in alive if w.worker_id != worker_id and w.state is not WorkerState.LEAVING]
    needed = max(len(rs.replicas) for rs in held)
    if len(stay) < needed:
        raise MembershipChangeRefused(
            f"removing worker {worker_id} would leave {len(stay)} live worker(s) in cluster {cluster} "
            f"({', '.join(stay) or 'none'}), fewer than the {needed} replicas its partitions need; "
            f"start a worker and add it first (ferrymq cluster add-worker)"
        )
    try:
        plan = without_worker({rs.partition: rs.replicas for rs in sets}, worker_id, stay)
    except CannotMove as exc:
        raise MembershipChangeRefused(
            f"worker {worker_id}'s replica of partition {exc.partition} cannot be moved: every live worker "
            f"that stays holds one already"
        ) from None
    leads = tuple(rs.partition for rs in held if rs.leader == worker_id)
    for rs in held:
        if rs.leader == worker_id and not (rs.isr - {worker_id}):
            raise MembershipChangeRefused(
                f"partition {rs.partition} cannot be moved yet: worker {worker_id} leads it and no other "
                f"replica is in sync to take over; try again once `ferrymq cluster status` shows one in its ISR"
            )
    return Removal(worker_id, cluster, {rs.partition: (rs.replicas, plan[rs.partition]) for rs in held}, leads)


def remove_worker(settings: Settings, removal: Removal, *, catch_up_seconds: float = 120.0,
                  handover_seconds: float = 60.0, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Carry out ``removal`` (see the module docstring); says one line per partition moved, then that the
    worker holds nothing. Returns what moved, as ``ferrymq cluster remove-worker --json`` prints it."""
    leaving, cluster = removal.worker_id, removal.cluster
    sets = ReplicaSets.from_settings(settings)
    # The leaders as the removal starts: once marked leaving, the worker hands its leaderships over by itself,
    # possibly before this loop reaches the partition it led.
    leaders_before = {rs.partition: rs.leader for rs in sets.all(cluster)}
    WorkerRegistry.from_settings(settings).set_state(cluster, leaving, WorkerState.LEAVING)
    moved: list[dict[str, Any]] = []
    for partition, (before, after) in sorted(removal.moves.items()):
        rs = sets.get(partition)
        if rs is None or leaving not in rs.replicas:
            say(f"partition {partition}: {leaving} holds no replica of it any more")
            continue
        if rs.replicas != before:
            raise MembershipChangeFailed(
                f"partition {partition} changed since the plan was made ({','.join(before)} -> "
                f"{','.join(rs.replicas)}); run the command again"
            )
        taker = _newcomer(before, after)
        led_by = leaders_before.get(partition, rs.leader)
        rs = _lead_elsewhere(sets, rs, leaving, handover_seconds)
        done = _move_replica(
            sets, rs, after, taker, catch_up_seconds,
            lead_elsewhere=lambda now: _wait_leader_elsewhere(sets, now, leaving, handover_seconds),
        )
        moved.append({"partition": partition, "before": list(before), "after": list(done.replicas),
                      "leader_before": led_by, "leader_after": done.leader})
        handed = f" (leader {led_by} -> {done.leader})" if led_by != done.leader else ""
        say(f"partition {partition}: {','.join(before)} -> {','.join(done.replicas)}{handed}")
    still = [rs.partition for rs in sets.all(cluster) if leaving in rs.replicas]
    if still:
        raise MembershipChangeFailed(
            f"worker {leaving} still holds replicas of partitions {', '.join(map(str, still))} (they joined it "
            f"meanwhile); run the command again"
        )
    say(f"worker {leaving} holds no replica in cluster {cluster} any more; it may be stopped")
    return {"worker_id": leaving, "cluster": cluster, "moved": moved, "holds": []}


def _newcomer(before: tuple[str, ...], after: tuple[str, ...]) -> str:
    (taker,) = set(after) - set(before)
    return taker


def _lead_elsewhere(sets: ReplicaSets, rs: ReplicaSet, leaving: str, timeout: float) -> ReplicaSet:
    """Put ``leaving`` last in the replica list (an in-sync other replica first when it leads), so that no
    handover ever goes to it and, leaving, it hands its leadership to the new first replica; then wait until
    another worker leads."""
    others = [r for r in rs.replicas if r != leaving]
    if rs.leader == leaving:
        successor = next((r for r in others if r in rs.isr), None)
        if successor is None:
            raise MembershipChangeFailed(
                f"partition {rs.partition}: no replica but {leaving} is in sync, so its leadership cannot move; "
                f"run the command again once another one is"
            )
        others = [successor, *(r for r in others if r != successor)]
    order = (*others, leaving)
    if order != rs.replicas:
        rs = _reassign(sets, rs, order)
    return _wait_leader_elsewhere(sets, rs, leaving, timeout) if rs.leader == leaving else rs


def _wait_leader_elsewhere(sets: ReplicaSets, rs: ReplicaSet, leaving: str, timeout: float) -> ReplicaSet:
    deadline = time.monotonic() + timeout
    while rs.leader == leaving:
        if time.monotonic() > deadline:
            raise MembershipChangeFailed(
                f"partition {rs.partition}: {leaving} still leads it after {timeout:.0f} s (a leaving worker hands "
                f"its leadership to the first replica, {rs.replicas[0]}, once that one is in sync and caught up: "
                f"is it?); its replicas are {','.join(rs.replicas)}; run the command again"
            )
        time.sleep(POLL_SECONDS)
        rs = sets.get(rs.partition) or rs
    return rs


# --- moving one replica ---------------------------------------------------------------------------------------


def _move_replica(sets: ReplicaSets, rs: ReplicaSet, target: tuple[str, ...], new: str, catch_up_seconds: float,
                  *, lead_elsewhere: Callable[[ReplicaSet], ReplicaSet] | None = None) -> ReplicaSet:
    """Widen ``rs`` by ``new``, wait until ``new`` is in sync, then set ``target`` (the replica list without the
    replica ``new`` replaces). Should the replica being dropped lead by then, ``lead_elsewhere`` (when given)
    waits until it does not; otherwise the move stops there, the partition keeping its wider list."""
    widened = (*rs.replicas, new)
    now = _reassign(sets, rs, widened)
    deadline = time.monotonic() + catch_up_seconds
    while new not in now.isr:
        if time.monotonic() > deadline:
            raise MembershipChangeFailed(
                f"partition {rs.partition}: {new} did not catch up within {catch_up_seconds:.0f} s; it stays an "
                f"extra replica ({','.join(now.replicas)}) until it does"
            )
        time.sleep(POLL_SECONDS)
        now = sets.get(rs.partition) or now
    while True:
        if now.replicas != widened:
            raise MembershipChangeFailed(f"partition {rs.partition} changed while {new} joined it: {now}")
        try:
            return _reassign(sets, now, target)
        except LeaderMustStay as exc:
            if lead_elsewhere is None:
                raise MembershipChangeFailed(
                    f"partition {rs.partition}: its leader is now the replica {new} was to replace; it keeps "
                    f"{','.join(now.replicas)}"
                ) from None
            now = lead_elsewhere(exc.current or now)


def _reassign(sets: ReplicaSets, rs: ReplicaSet, replicas: tuple[str, ...]) -> ReplicaSet:
    """``reassign`` from ``rs`` to ``replicas``, again against each new epoch while only the epoch moved (a
    failover or handover meanwhile); a replica list changed by someone else stops the move."""
    now = rs
    while True:
        try:
            return sets.reassign(now.partition, now.epoch, replicas, previous=now.replicas)
        except Fenced as exc:
            fresh = exc.current or sets.get(now.partition)
            if fresh is None or fresh.replicas != now.replicas:
                raise MembershipChangeFailed(
                    f"partition {now.partition} changed meanwhile: {fresh}; run the command again"
                ) from None
            now = fresh
            time.sleep(POLL_SECONDS / 2)
