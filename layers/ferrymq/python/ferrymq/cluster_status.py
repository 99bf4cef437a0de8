"""The storage cluster as ``ferrymq cluster status`` and FerryMQ's GetClusterStatus show it: every registered
cluster (its partitions, and the queues placed on it against its capacity), then one cluster in detail: its
workers (as the registry and their own ``ping`` report them) and its partitions (their coordination items, with
each replica's lag behind the leader's log end in records, and what became of any copy its worker found
damaged: set aside and repaired from a replica, or refused, from the pings).

Reading the registries is blocking (DynamoDB); pinging the workers is asynchronous. :meth:`Registries.read`
and :func:`ping_all` are the two halves, so the front end can run the first on its metadata threads and the second
on its event loop; :func:`status` runs both for a command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any

from ferrymq.aws.clusters import ClusterInfo, ClusterRegistry
from ferrymq.aws.replica_sets import ReplicaSets
from ferrymq.aws.workers import WorkerInfo, WorkerRegistry
from ferrymq.errors import ServiceUnavailable
from ferrymq.replication_rules import ReplicaSet, heartbeat_fresh
from ferrymq.rpc.client import WorkerClient
from ferrymq.rpc.peer_auth import PeerAuth
from ferrymq.settings import Settings

PING_CONNECT_SECONDS = 1.0
PING_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class Coordination:
    """What the registries hold about the clusters, read at ``now_ms``."""

    cluster: str
    now_ms: int
    grace_ms: int
    alive: list[WorkerInfo]
    dead: list[WorkerInfo]
    replica_sets: list[ReplicaSet]
    clusters: list[ClusterInfo]

    def addresses(self) -> dict[str, tuple[str, int]]:
        """Where to ping each live worker."""
        return {w.worker_id: (w.host, w.port) for w in self.alive}


@dataclass(frozen=True)
class Registries:
    """Where the coordination items live (one DynamoDB client may serve all three)."""

    workers: WorkerRegistry
    replica_sets: ReplicaSets
    clusters: ClusterRegistry

    @classmethod
    def from_client(cls, dynamodb: Any, settings: Settings) -> Registries:
        return cls(WorkerRegistry(dynamodb, settings.workers_table),
                   ReplicaSets(dynamodb, settings.partitions_table),
                   ClusterRegistry(dynamodb, settings.workers_table))

    @classmethod
    def from_settings(cls, settings: Settings) -> Registries:
        from ferrymq.aws import session

        return cls.from_client(session.client("dynamodb", settings), settings)

    def read(self, cluster: str, grace_seconds: float, now_ms: int | None = None) -> Coordination:
        """Every cluster, and ``cluster`` in detail; a worker silent for ``grace_seconds`` is dead."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        grace_ms = int(grace_seconds * 1000)
        alive, dead = self.workers.members(cluster, now_ms, grace_ms)
        return Coordination(
            cluster=cluster,
            now_ms=now_ms,
            grace_ms=grace_ms,
            alive=list(alive),
            dead=list(dead),
            replica_sets=list(self.replica_sets.all(cluster)),
            clusters=list(self.clusters.all()),
        )


async def _ping(host: str, port: int, auth: PeerAuth | None) -> dict[str, Any] | None:
    client = WorkerClient(host, port, connect_timeout=PING_CONNECT_SECONDS, request_timeout=PING_TIMEOUT_SECONDS,
                          auth=auth)
    try:
        return await client.ping()
    except ServiceUnavailable:
        return None
    finally:
        with contextlib.suppress(Exception):
            await client.close()


async def ping_all(addresses: dict[str, tuple[str, int]], auth: PeerAuth | None) -> dict[str, dict[str, Any] | None]:
    """Each worker's ping answer, None for one that did not answer."""
    answers = await asyncio.gather(*(_ping(*address, auth) for address in addresses.values()))
    return dict(zip(addresses, answers, strict=True))


def assemble(seen: Coordination, pings: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    """The status report: ``{"cluster", "clusters", "workers", "partitions"}``."""
    now_ms, sets = seen.now_ms, seen.replica_sets
    clusters = [
        {"cluster": c.name, "partitions": list(c.partitions), "queues": c.queues, "max_queues": c.max_queues}
        for c in seen.clusters
    ]
    workers = [
        {
            "worker_id": info.worker_id,
            "address": f"{info.host}:{info.port}",
            # The admin HTTP listener (/health/live, /health/ready, /metrics); None if it runs none.
            "admin": info.admin,
            "alive": heartbeat_fresh(info.heartbeat_at, now_ms, seen.grace_ms),
            "state": info.state.value,
            "heartbeat_age_ms": now_ms - info.heartbeat_at,
            "leads": [rs.partition for rs in sets if rs.leader == info.worker_id and rs.leader_address],
            "answers": pings.get(info.worker_id) is not None,
            # The longest its event loop was held in the last minute (ms); None if it did not answer.
            "worst_stall_ms": (pings.get(info.worker_id) or {}).get("loop_lag_worst_ms"),
            # Its last stalls of 50 ms or more, each with where the loop's thread was meanwhile: on a CPU, waiting
            # for one (the machine's cores busy elsewhere) or asleep (the GIL, a blocking call, a page read from disk).
            "recent_stalls": (pings.get(info.worker_id) or {}).get("stalls", []),
        }
        for info in sorted([*seen.alive, *seen.dead], key=lambda w: w.worker_id)
    ]

    def end_offset(worker: str, partition: int) -> int | None:
        answer = pings.get(worker)
        replica = answer.get("partitions", {}).get(str(partition)) if answer else None
        return replica.get("end_offset") if replica else None

    def damage(worker: str, partition: int) -> dict[str, Any] | None:
        answer = pings.get(worker)
        replica = answer.get("partitions", {}).get(str(partition)) if answer else None
        return replica.get("damage") if replica else None

    partitions = [
        {
            "partition": rs.partition,
            "leader": rs.leader,
            "epoch": rs.epoch,
            "replicas": list(rs.replicas),
            "isr": sorted(rs.isr),
            "acks": rs.acks.value,
            "lease_ms_left": max(rs.lease_until - now_ms, 0),
            "lag": _lags(rs, end_offset),
            "damage": _damage_notes(rs, damage),
        }
        for rs in sets
    ]
    return {"cluster": seen.cluster, "clusters": clusters, "workers": workers, "partitions": partitions}


def _lags(rs: ReplicaSet, end_offset: Any) -> dict[str, int | None]:
    """Records each replica lacks of the leader's log; None where a worker did not answer."""
    leader_end = end_offset(rs.leader, rs.partition)
    out: dict[str, int | None] = {}
    for replica in rs.replicas:
        mine = end_offset(replica, rs.partition)
        out[replica] = None if leader_end is None or mine is None else max(leader_end - mine, 0)
    return out


def _damage_notes(rs: ReplicaSet, damage: Any) -> dict[str, str]:
    """Per replica whose log its worker found damaged (as its ping reports): what became of the copy."""
    out: dict[str, str] = {}
    for replica in rs.replicas:
        found = damage(replica, rs.partition)
        if not found:
            continue
        where = f"{found.get('segment')} at byte {found.get('byte')}" if found.get("segment") else found.get("detail")
        if found.get("set_aside"):
            state = (
                "repaired from replica" if replica in rs.isr else "catching up from the leader (not in sync yet)"
            )
            out[replica] = f"{state}: damaged copy ({where}) set aside at {found['set_aside']}"
        else:
            why = found.get("refused") or "not repaired yet"
            out[replica] = f"refused: damaged log ({where}); {why}"
    return out


def status(settings: Settings, now_ms: int | None = None, cluster: str | None = None) -> dict[str, Any]:
    """:meth:`Registries.read`, :func:`ping_all` and :func:`assemble` in one blocking call (outside an event
    loop), about ``cluster`` (default ``settings.cluster``)."""
    seen = Registries.from_settings(settings).read(cluster or settings.cluster, settings.worker_grace_seconds, now_ms)
    return assemble(seen, asyncio.run(ping_all(seen.addresses(), PeerAuth.from_settings(settings))))
