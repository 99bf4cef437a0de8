"""Placement, as pure functions and a pure placer: where partitions live inside a cluster (the in-cluster
manager's choices) and which cluster takes each new queue (the out-cluster manager's).

Replicas of partition ``p`` over workers ``w[0..n-1]`` are ``w[p mod n], w[p+1 mod n], ...``: each worker is
the preferred leader (the first replica) of an equal share of the partitions, and holds ``rf / n`` of them,
so leadership and load are spread evenly when every worker is up.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def replicas_for(partition: int, workers: Sequence[str], replication_factor: int) -> tuple[str, ...]:
    """The replica list of ``partition``, its preferred leader first."""
    if not workers:
        raise ValueError("a cluster has at least one worker")
    if not 1 <= replication_factor <= len(workers):
        raise ValueError(
            f"the replication factor {replication_factor} must be between 1 and the {len(workers)} workers"
        )
    if len(set(workers)) != len(workers):
        raise ValueError(f"worker ids listed twice: {list(workers)}")
    n = len(workers)
    return tuple(workers[(partition + i) % n] for i in range(replication_factor))


def holding(partitions: Sequence[int], workers: Sequence[str], replication_factor: int) -> dict[str, list[int]]:
    """The partitions each worker holds a replica of."""
    out: dict[str, list[int]] = {w: [] for w in workers}
    for p in partitions:
        for w in replicas_for(p, workers, replication_factor):
            out[w].append(p)
    return out


def replacements(
    replica_sets: Sequence[tuple[int, str, Sequence[str]]], alive: Sequence[str], dead: Sequence[str]
) -> dict[int, tuple[str, ...]]:
    """The new replica list of every partition that has a dead replica and a live leader, each dead replica
    replaced in place by the live worker holding the fewest replicas (ties by id) that is not one already.

    ``replica_sets`` holds ``(partition, leader, replicas)``. A dead leader is left to an election first (the
    leader must stay in its replica set); a partition with no live worker to take a dead replica's place
    keeps its list until one joins. Workers neither alive nor dead (never heard of) are left alone.
    """
    load = {w: 0 for w in alive}
    for _, _, replicas in replica_sets:
        for r in replicas:
            if r in load:
                load[r] += 1
    gone = set(dead)
    out: dict[int, tuple[str, ...]] = {}
    for partition, leader, replicas in sorted(replica_sets):
        if leader in gone or not gone.intersection(replicas):
            continue
        new = list(replicas)
        for i, r in enumerate(new):
            if r not in gone:
                continue
            candidates = sorted((n, w) for w, n in load.items() if w not in new)
            if not candidates:
                break
            _, chosen = candidates[0]
            new[i] = chosen
            load[chosen] += 1
        if new != list(replicas):
            out[partition] = tuple(new)
    return out


# --- across clusters: the out-cluster manager's choices ---------------------------------------------------


@dataclass(frozen=True)
class Shard:
    """One part of a queue placed on a cluster: a queue above ``max_shard`` is spread over several, each
    on the cluster least loaded when it is placed (sends go round the shards, receives gather from them)."""

    queue: str
    index: int
    cluster: str
    size: float


class ClusterPlacer:
    """Places queues (by expected load: messages per second, bytes, whatever is billed) on clusters.

    Each shard goes to the cluster whose utilisation (load / capacity) is lowest and that has room for it
    (a heap keyed by utilisation: O(log clusters) per shard); no cluster is filled over its capacity, and a
    queue that fits nowhere is refused. A queue larger than ``max_shard`` is split into equal shards no
    larger than it, so one huge queue cannot unbalance a cluster.
    """

    def __init__(
        self, capacities: Mapping[str, float], *, max_shard: float, load: Mapping[str, float] | None = None
    ) -> None:
        """``load``: what each cluster holds already (none when not named)."""
        if not capacities or any(c <= 0 for c in capacities.values()):
            raise ValueError("every cluster has a positive capacity")
        if max_shard <= 0:
            raise ValueError("max_shard is positive")
        self.capacity = dict(capacities)
        self.load = {name: float((load or {}).get(name, 0.0)) for name in capacities}
        self.max_shard = max_shard
        self._heap = [(self.load[name] / self.capacity[name], name) for name in sorted(capacities)]
        heapq.heapify(self._heap)

    def place(self, queue: str, size: float) -> list[Shard] | None:
        """The shards of a new queue of expected ``size``; None (nothing placed) when some shard fits on
        no cluster."""
        count = max(1, math.ceil(size / self.max_shard))
        part = size / count
        chosen: list[Shard] = []
        for index in range(count):
            cluster = self._take(part)
            if cluster is None:
                for shard in chosen:
                    self._add(shard.cluster, -shard.size)
                return None
            chosen.append(Shard(queue, index, cluster, part))
        return chosen

    def _take(self, size: float) -> str | None:
        skipped = []
        found = None
        while self._heap:
            utilisation, name = heapq.heappop(self._heap)
            if utilisation != self.load[name] / self.capacity[name]:
                continue  # stale entry
            if self.load[name] + size <= self.capacity[name]:
                found = name
                break
            skipped.append(name)
        for name in skipped:
            heapq.heappush(self._heap, (self.load[name] / self.capacity[name], name))
        if found is not None:
            self._add(found, size)
        return found

    def _add(self, name: str, size: float) -> None:
        self.load[name] += size
        heapq.heappush(self._heap, (self.load[name] / self.capacity[name], name))

    def imbalance(self) -> float:
        """Max over mean utilisation."""
        utilisation = [self.load[n] / self.capacity[n] for n in self.capacity]
        mean = sum(utilisation) / len(utilisation)
        return max(utilisation) / mean if mean else 1.0


# --- inside a cluster: adding a worker ----------------------------------------------------------------------


def with_new_worker(
    replica_lists: Mapping[int, Sequence[str]], new: str, pinned: Mapping[int, str] | None = None
) -> dict[int, tuple[str, ...]]:
    """The replica lists after ``new`` joins: the fewest replica moves that leave every worker holding the
    same number of replicas give or take one, each move taking a replica from the most loaded worker (never
    the partition's preferred leader while another replica can go) and giving it to ``new``.

    With ``n`` workers before, ``new`` ends up holding ``1/(n+1)`` of the replicas, and that is all that
    moves: every other replica stays where it was. ``pinned`` names a replica per partition that must stay
    (its current leader: moving leadership is an election, not a reassignment).
    """
    pinned = pinned or {}
    lists = {p: list(r) for p, r in replica_lists.items()}
    if any(new in r for r in lists.values()):
        raise ValueError(f"{new} already holds replicas")
    held: dict[str, list[int]] = {}
    for p, replicas in sorted(lists.items()):
        for w in replicas:
            held.setdefault(w, []).append(p)
    total = sum(len(r) for r in lists.values())
    target = total // (len(held) + 1)
    moved = 0
    while moved < target:
        donor = max(held, key=lambda w: (len(held[w]), w))
        # A partition of the donor's that ``new`` does not hold yet, preferring ones the donor does not lead.
        candidates = [p for p in held[donor] if new not in lists[p] and pinned.get(p) != donor]
        if not candidates:
            # The busiest worker can give nothing (it leads all it holds): the next busiest may.
            givers = [w for w in held if any(new not in lists[q] and pinned.get(q) != w for q in held[w])]
            if not givers:
                break
            donor = max(givers, key=lambda w: (len(held[w]), w))
            candidates = [p for p in held[donor] if new not in lists[p] and pinned.get(p) != donor]
        candidates.sort(key=lambda p: (lists[p][0] == donor, p))
        p = candidates[0]
        lists[p][lists[p].index(donor)] = new
        held[donor].remove(p)
        moved += 1
    return {p: tuple(r) for p, r in lists.items()}


# --- inside a cluster: removing a worker --------------------------------------------------------------------


class CannotMove(ValueError):
    """A replica of the leaving worker has nowhere to go: every worker that stays holds its partition already."""

    def __init__(self, partition: int) -> None:
        super().__init__(f"partition {partition}: every worker that stays holds a replica of it already")
        self.partition = partition


def without_worker(
    replica_lists: Mapping[int, Sequence[str]], leaving: str, workers: Sequence[str]
) -> dict[int, tuple[str, ...]]:
    """The replica lists after ``leaving`` goes: each replica it holds replaced in place (its rank in the list
    kept, so preferred leadership stays spread as placement laid it out) by one of ``workers`` (those that
    stay) not holding that partition yet. Those replicas are all that move: the fewest moves there are.

    Of the ways to place them, one that leaves the staying workers' replica counts as even as any placement
    of these replicas can (none has a smaller spread, or the same spread and a smaller largest count): within
    one of each other for a cluster laid out evenly. Raises :class:`CannotMove` naming a partition every
    staying worker holds already.
    """
    stay = sorted(set(workers) - {leaving})
    lists = {p: list(r) for p, r in replica_lists.items()}
    load = dict.fromkeys(stay, 0)
    for replicas in lists.values():
        for w in replicas:
            if w in load:
                load[w] += 1
    moving = sorted(p for p, r in lists.items() if leaving in r)
    options = {p: [w for w in stay if w not in lists[p]] for p in moving}
    for p in moving:
        if not options[p]:
            raise CannotMove(p)
    chosen: dict[int, str] = {}
    # The most constrained partitions first, each to the least loaded worker it may go to; the greedy pass
    # alone can strand a replica on a busy worker, which the evening chains below then undo.
    for p in sorted(moving, key=lambda q: (len(options[q]), q)):
        chosen[p] = min(options[p], key=lambda w: (load[w], w))
        load[chosen[p]] += 1
    while (chain := _evening_chain(chosen, options, load)) is not None:
        for p, w in chain:
            load[chosen[p]] -= 1
            chosen[p] = w
            load[w] += 1
    for p, w in chosen.items():
        lists[p][lists[p].index(leaving)] = w
    return {p: tuple(r) for p, r in lists.items()}


def _evening_chain(
    chosen: Mapping[int, str], options: Mapping[int, Sequence[str]], load: Mapping[str, int]
) -> list[tuple[int, str]] | None:
    """Re-placements ``(partition, new worker)`` of chosen replicas along a chain of workers u -> ... -> v, each
    handing one replica to the next, that takes one replica off u and gives one to v holding at least two
    fewer; None when there is none. Without such a chain the counts are as even as they can be (an
    assignment with no cost-reducing path is optimal, as for semi-matchings), and each chain found makes the
    sum of squared counts smaller, so the search ends."""
    by_worker: dict[str, list[int]] = {}
    for p, w in sorted(chosen.items()):
        by_worker.setdefault(w, []).append(p)
    for source in sorted(by_worker, key=lambda w: (-load[w], w)):
        came_by: dict[str, tuple[int, str] | None] = {source: None}
        frontier = [source]
        while frontier:
            following: list[str] = []
            for u in frontier:
                for p in by_worker.get(u, []):
                    for v in options[p]:
                        if v in came_by:
                            continue
                        came_by[v] = (p, u)
                        if load[v] <= load[source] - 2:
                            return _chain_to(v, came_by)
                        following.append(v)
            frontier = following
    return None


def _chain_to(end: str, came_by: Mapping[str, tuple[int, str] | None]) -> list[tuple[int, str]]:
    chain: list[tuple[int, str]] = []
    worker = end
    while (step := came_by[worker]) is not None:
        partition, previous = step
        chain.append((partition, worker))
        worker = previous
    return chain[::-1]
