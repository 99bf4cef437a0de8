"""The queue engine: a pure state machine over log records (no sockets, no disks, no wall clock of its own)."""

from storage_workers.engine.engine import FIFO_RECEIVED_FIELDS, RECEIVED_FIELDS, Engine, Polled, Redrive
from storage_workers.engine.tasks import Outgoing

__all__ = ["FIFO_RECEIVED_FIELDS", "RECEIVED_FIELDS", "Engine", "Outgoing", "Polled", "Redrive"]
