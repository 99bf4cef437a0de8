"""What one storage worker process is configured with, drawn from Settings and its command line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferrymq.settings import Settings
from storage_workers.engine.engine import TRANSFER_HOLD_SECONDS
from storage_workers.log.writer import DEFAULT_SEGMENT_BYTES


@dataclass(frozen=True)
class WorkerConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    worker_id: str = "worker-1"
    partitions: tuple[int, ...] = (0,)
    """The partitions this worker serves, each in ``<data_dir>/p<partition>/``; a data directory of the
    single-partition layout is adopted by the first."""
    group_commit_max_batch: int = 1024
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    compact_min_bytes: int = 128 * 1024 * 1024
    compact_ratio: float = 4.0
    register: bool = True
    transfer_hold_seconds: int = TRANSFER_HOLD_SECONDS
    sweep_interval_seconds: float = 30.0
    """How often resend windows, receive attempts and idle queue states are pruned."""
    pending_drops_interval_seconds: float = 60.0
    """How often the partition's pending queue drops are read from the catalog (and once at start)."""

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> WorkerConfig:
        worker_id = overrides.pop("worker_id", None) or settings.worker_id
        data_dir = overrides.pop("data_dir", None) or settings.data_dir / "workers" / worker_id
        values: dict[str, Any] = {
            "data_dir": Path(data_dir),
            "host": settings.worker_host,
            "port": settings.worker_port,
            "worker_id": worker_id,
            "group_commit_max_batch": settings.group_commit_max_batch,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def __post_init__(self) -> None:
        if not self.partitions:
            raise ValueError("a worker serves at least one partition")
        if len(set(self.partitions)) != len(self.partitions):
            raise ValueError(f"partitions listed twice: {self.partitions}")
        if any(p < 0 for p in self.partitions):
            raise ValueError(f"partitions are not negative: {self.partitions}")
