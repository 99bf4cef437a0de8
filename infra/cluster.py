"""The local stack's storage cluster: its replica sets, and what ``ferrymq cluster status`` shows (adding and
removing workers: :mod:`ferrymq.infra.membership`).

``ensure_replica_sets`` gives every partition a replica set over the cluster's workers
(:func:`ferrymq.placement.replicas_for`) unless it has one. A partition whose data a single worker held
before replication (a stack started by an earlier version) is created with only the workers that hold a
log for it in sync, so only they may lead and the others copy it from them instead of the reverse.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferrymq import cluster_status
from ferrymq.aws.clusters import ClusterRegistry
from ferrymq.aws.replica_sets import PartitionExists, ReplicaSets
from ferrymq.aws.workers import WorkerState
from ferrymq.placement import replicas_for
from ferrymq.replication_rules import Acks, ReplicaSet
from ferrymq.settings import Settings
from ferrymq.storage.log.format import HEADER_SIZE
from ferrymq.storage.log.segments import list_segments, segment_path
from ferrymq.storage.server.layout import replica_dir

log = logging.getLogger(__name__)


def worker_ids(count: int, start: int = 0) -> list[str]:
    return [f"worker-{i}" for i in range(start, start + count)]


@dataclass(frozen=True)
class ClusterLayout:
    """One cluster of the stack: its name, its workers and the partitions whose replica sets it holds."""

    name: str
    workers: tuple[str, ...]
    partitions: tuple[int, ...]


def cluster_layouts(settings: Settings) -> list[ClusterLayout]:
    """The stack's ``settings.clusters`` clusters, each of ``settings.workers`` workers and
    ``settings.partitions`` partitions, numbered on from the previous cluster's (so a stack of one cluster
    keeps its names, workers and partitions when more are added)."""
    out = []
    for index in range(settings.clusters):
        out.append(
            ClusterLayout(
                name=settings.cluster if index == 0 else f"{settings.cluster}-{index}",
                workers=tuple(worker_ids(settings.workers, index * settings.workers)),
                partitions=tuple(range(index * settings.partitions, (index + 1) * settings.partitions)),
            )
        )
    return out


def ensure_replica_sets(settings: Settings, layout: ClusterLayout) -> dict[int, ReplicaSet]:
    """The replica set of every partition of the cluster, created where missing; each new one's preferred
    leader holds a lease of one lease period, so that it, not whichever worker starts first, takes the first
    epoch. The cluster is registered (its partitions and capacity) for the placement of new queues."""
    sets = ReplicaSets.from_settings(settings)
    acks = Acks(settings.acks)
    lease_until = int(time.time() * 1000 + settings.leader_lease_seconds * 1000)
    out: dict[int, ReplicaSet] = {}
    for partition in layout.partitions:
        current = sets.get(partition)
        if current is not None:
            out[partition] = current
            continue
        replicas = list(replicas_for(partition, layout.workers, settings.replication_factor))
        holders = [w for w in replicas if _holds_data(settings.data_dir, w, partition)]
        if holders:
            replicas = holders + [w for w in replicas if w not in holders]
        try:
            out[partition] = sets.create(
                partition, layout.name, replicas, acks, isr=holders or None, lease_until=lease_until
            )
        except PartitionExists as exc:
            if exc.current is None:
                raise
            out[partition] = exc.current
    ClusterRegistry.from_settings(settings).register(layout.name, list(layout.partitions), settings.cluster_max_queues)
    return out


def _holds_data(data_dir: Path, worker: str, partition: int) -> bool:
    directory = replica_dir(data_dir / "workers" / worker, partition)
    # Any segment longer than a header holds a record (or a snapshot of one).
    return directory.is_dir() and any(
        segment_path(directory, index).stat().st_size > HEADER_SIZE for index in list_segments(directory)
    )


def status(settings: Settings, now_ms: int | None = None, cluster: str | None = None) -> dict[str, Any]:
    """What ``ferrymq cluster status`` shows (:mod:`ferrymq.cluster_status`, which GetClusterStatus shares)."""
    return cluster_status.status(settings, now_ms, cluster)


@dataclass(frozen=True)
class StatusTable:
    """One table of ``ferrymq cluster status``."""

    title: str
    columns: tuple[str, ...]
    rows: list[tuple[str, ...]]


def render(report: dict[str, Any]) -> tuple[list[StatusTable], list[str]]:
    """``status`` as tables, then notes on damaged copies. Partition ids read ``p0``, ``p0-p3``, so that a column
    of them is not taken for a count."""
    tables = []
    if report["clusters"]:
        tables.append(StatusTable("clusters", ("CLUSTER", "PARTITIONS", "QUEUES", "CAPACITY (queues)"), [
            (c["cluster"], _ranges(c["partitions"]) or "none", str(c["queues"]), str(c["max_queues"]))
            for c in report["clusters"]]))
    workers = []
    for w in report["workers"]:
        workers.append(
            (
                w["worker_id"],
                w["address"],
                w.get("admin") or "-",
                ("yes" if w["alive"] else f"no ({w['heartbeat_age_ms'] // 1000} s silent)")
                + (" (leaving)" if w.get("state") == WorkerState.LEAVING.value else ""),
                "yes" if w["answers"] else "no",
                ",".join(f"p{n}" for n in w["leads"]) or "none",
                "-" if w.get("worst_stall_ms") is None else f"{w['worst_stall_ms']} ms",
            )
        )
    tables.append(StatusTable(f"cluster {report['cluster']}: workers",
                              ("WORKER", "ADDRESS", "ADMIN", "ALIVE", "ANSWERS", "LEADER OF", "WORST STALL (1 min)"),
                              workers))
    partitions = []
    for p in report["partitions"]:
        lag = " ".join(f"{r}={'?' if n is None else n}" for r, n in p["lag"].items() if r != p["leader"])
        partitions.append(
            (f"p{p['partition']}", p["leader"], str(p["epoch"]), ",".join(p["isr"]), ",".join(p["replicas"]),
             p["acks"], lag or "-")
        )
    tables.append(StatusTable(f"cluster {report['cluster']}: partitions",
                              ("PARTITION", "LEADER", "EPOCH", "ISR", "REPLICAS", "ACKS", "LAG (records)"), partitions))
    notes = [f"partition {p['partition']} on {r}: {note}" for p in report["partitions"]
             for r, note in sorted(p.get("damage", {}).items())]
    return tables, notes


def _ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``p0-p2,p5``."""
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and spans[-1][1] == n - 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ",".join(f"p{a}" if a == b else f"p{a}-p{b}" for a, b in spans)
