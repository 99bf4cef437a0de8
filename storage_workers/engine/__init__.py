"""The queue engine: a pure state machine over log records (no sockets, no disks, no wall clock of its own)."""

from storage_workers.engine.engine import RECEIVED_FIELDS, Engine

__all__ = ["RECEIVED_FIELDS", "Engine"]
