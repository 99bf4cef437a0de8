"""What one storage worker process is configured with, drawn from Settings and its command line."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ferrymq.rpc.peer_auth import PeerAuth
from ferrymq.settings import Settings
from ferrymq.storage.engine.engine import TRANSFER_HOLD_SECONDS
from ferrymq.storage.log.writer import DEFAULT_SEGMENT_BYTES
from ferrymq.storage.replication.roles import FollowerRole, LeaderRole


@dataclass(frozen=True)
class WorkerConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    replication_port: int = 0
    """The port followers are told to fetch from, when it is not ``port`` (0: ``port``)."""
    admin_host: str = "127.0.0.1"
    admin_port: int | None = None
    """The admin HTTP listener's port (health checks, metrics: :mod:`.admin`), 0 for any free one; None: none."""
    worker_id: str = "worker-1"
    partitions: tuple[int, ...] = (0,)
    """The partitions this worker serves, each in ``<data_dir>/p<partition>/``; a data directory of the
    single-partition layout is adopted by the first.  A worker in a cluster starts with those and hosts any
    other its cluster's replica sets add it to (none: a spare)."""
    group_commit_max_batch: int = 1024
    body_cache_bytes: int = 32 * 1024 * 1024
    """Recent message bodies kept in memory, shared by the worker's partitions (the rest are read from the log)."""
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    compact_min_bytes: int = 128 * 1024 * 1024
    compact_ratio: float = 4.0
    checkpoint_bytes: int = 32 * 1024 * 1024
    """Log bytes appended between checkpoints taken while serving, at least (:mod:`.running_checkpoint`); 0: none."""
    checkpoint_max_bytes: int = 0
    """How far that interval stretches as checkpoints cost more CPU (a larger state to hash); at most
    ``checkpoint_bytes``: it does not."""
    checkpoint_records: int = 8192
    """Records appended between checkpoints taken while serving, at least, whatever their bytes; 0: only bytes
    count."""
    stall_trace_ms: int = 0
    """A loop held this long gets every thread's stack written to standard error (:mod:`.loop_lag`); 0: off."""
    sync_on_loop_ms: float = 10.0
    """Group commits are synced on the event loop while every sync takes less than this (:mod:`..log.sync_place`);
    0: always in the log's I/O thread."""
    sync_calm_seconds: float = 10.0
    """How long syncs stay in the I/O threads after a slow one, and after the worker starts."""
    register: bool = True
    transfer_hold_seconds: int = TRANSFER_HOLD_SECONDS
    sweep_interval_seconds: float = 30.0
    """How often resend windows, receive attempts and idle queue states are pruned."""
    pending_drops_interval_seconds: float = 60.0
    """How often the partition's pending queue drops are read from the catalog (and once at start)."""
    leads: Mapping[int, LeaderRole] = field(default_factory=dict)
    """Replica set, in-sync set, acks mode and epoch of partitions this worker leads; a served partition in
    neither this nor ``follows`` is led alone (``LeaderRole()``: no followers, ``acks=leader``)."""
    follows: Mapping[int, FollowerRole] = field(default_factory=dict)
    """Partitions this worker follows, each with its leader's address: it serves no requests for them."""
    peer_auth: PeerAuth | None = None
    """The cluster-secret handshake every connection to this worker must pass, and that its own connections
    (to leaders it follows, to other workers) pass; None: connections are not authenticated."""

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> WorkerConfig:
        worker_id = overrides.pop("worker_id", None) or settings.worker_id
        data_dir = overrides.pop("data_dir", None) or settings.data_dir / "workers" / worker_id
        values: dict[str, Any] = {
            "data_dir": Path(data_dir),
            "host": settings.worker_host,
            "port": settings.worker_port,
            "replication_port": settings.worker_replication_port,
            "admin_host": settings.worker_admin_host,
            "admin_port": settings.worker_admin_port,
            "worker_id": worker_id,
            "group_commit_max_batch": settings.group_commit_max_batch,
            "body_cache_bytes": settings.worker_body_cache_bytes,
            "segment_bytes": settings.worker_segment_bytes,
            "compact_min_bytes": settings.worker_compact_min_bytes,
            "compact_ratio": settings.worker_compact_ratio,
            "checkpoint_bytes": settings.worker_checkpoint_bytes,
            "checkpoint_max_bytes": settings.worker_checkpoint_max_bytes,
            "checkpoint_records": settings.worker_checkpoint_records,
            "stall_trace_ms": settings.worker_stall_trace_ms,
            "sync_on_loop_ms": settings.worker_sync_on_loop_ms,
            "sync_calm_seconds": settings.worker_sync_calm_seconds,
            "peer_auth": PeerAuth.from_settings(settings),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def __post_init__(self) -> None:
        if not self.partitions and not self.register:
            raise ValueError("a worker outside any cluster serves at least one partition")
        if len(set(self.partitions)) != len(self.partitions):
            raise ValueError(f"partitions listed twice: {self.partitions}")
        if any(p < 0 for p in self.partitions):
            raise ValueError(f"partitions are not negative: {self.partitions}")
        unknown = (set(self.leads) | set(self.follows)) - set(self.partitions)
        if unknown:
            raise ValueError(f"roles given for partitions not served: {sorted(unknown)}")
        both = set(self.leads) & set(self.follows)
        if both:
            raise ValueError(f"partitions both led and followed: {sorted(both)}")
        if self.segment_bytes < 1 or self.compact_min_bytes < 1 or not self.compact_ratio > 0:
            raise ValueError(
                "FERRYMQ_WORKER_SEGMENT_BYTES and FERRYMQ_WORKER_COMPACT_MIN_BYTES are at least 1, "
                "FERRYMQ_WORKER_COMPACT_RATIO above 0"
            )
        if self.checkpoint_bytes < 0 or self.checkpoint_max_bytes < 0 or self.checkpoint_records < 0:
            raise ValueError(
                "FERRYMQ_WORKER_CHECKPOINT_BYTES, FERRYMQ_WORKER_CHECKPOINT_MAX_BYTES and "
                "FERRYMQ_WORKER_CHECKPOINT_RECORDS are not negative (0: no checkpoints while serving, an interval "
                "that does not stretch, and only bytes counted)"
            )
        if self.stall_trace_ms < 0:
            raise ValueError("FERRYMQ_WORKER_STALL_TRACE_MS is not negative (0: off)")
        if not math.isfinite(self.sync_on_loop_ms) or self.sync_on_loop_ms < 0:
            raise ValueError(
                f"FERRYMQ_WORKER_SYNC_ON_LOOP_MS is a number of ms, not negative (0: syncs always in the log's "
                f"I/O thread), not {self.sync_on_loop_ms}"
            )
        if not math.isfinite(self.sync_calm_seconds) or self.sync_calm_seconds < 0:
            raise ValueError(
                f"FERRYMQ_WORKER_SYNC_CALM_SECONDS is a number of seconds, not negative, not {self.sync_calm_seconds}"
            )

    def role(self, partition: int) -> LeaderRole | FollowerRole:
        """The role this worker plays for ``partition``."""
        follower = self.follows.get(partition)
        return follower if follower is not None else self.leads.get(partition, LeaderRole())
