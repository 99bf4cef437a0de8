"""The queue engine: a pure state machine over log records (no sockets, no disks, no wall clock of its own).

:class:`PartitionState` is the state and its ``apply`` (what recovery and followers run); :class:`Engine` is
the request side, which decides and emits the records.
"""

from ferrymq.storage.engine.engine import FIFO_RECEIVED_FIELDS, RECEIVED_FIELDS, Engine, Polled, Redrive
from ferrymq.storage.engine.receipts import Receipts
from ferrymq.storage.engine.state import PartitionState
from ferrymq.storage.engine.tasks import Outgoing

__all__ = [
    "FIFO_RECEIVED_FIELDS",
    "RECEIVED_FIELDS",
    "Engine",
    "Outgoing",
    "PartitionState",
    "Polled",
    "Receipts",
    "Redrive",
]
