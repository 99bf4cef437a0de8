"""Background upkeep of a worker's state and log: compaction's fold, and periodic sweeps.

Compaction (when and how, see :mod:`ferrymq.storage.log.compaction`) needs a fold that turns sealed segments
into the records that rebuild their state: replay them into a fresh engine and snapshot it.  Sweeps prune
what only time makes dead (resend ids, receive attempts, idle queue states) without a record, since nothing
replayed depends on entries past their window.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator

from ferrymq.storage.engine import PartitionState
from ferrymq.storage.engine.fold import Removals, folded
from ferrymq.storage.engine.records import Record

log = logging.getLogger(__name__)


def fold(records: Iterator[Record], removals: Removals) -> Iterable[Record]:
    """Compaction's fold: replay into a fresh partition state, leaving out what ``removals`` says is removed
    later (:mod:`ferrymq.storage.engine.fold`), then snapshot it."""
    return folded(records, removals).snapshot()


class StateFold:
    """Compaction's fold that keeps the state it folded (until the next fold), for the checkpoint written with
    the new base."""

    def __init__(self) -> None:
        self.state: PartitionState | None = None

    def __call__(self, records: Iterator[Record], removals: Removals) -> Iterable[Record]:
        self.state = folded(records, removals)
        return self.state.snapshot()


async def every(name: str, interval: float, step: Callable[[], bool]) -> None:
    """Every ``interval`` seconds until cancelled, call ``step`` until it answers false (it did all there was),
    letting the loop run between calls; a failing run is logged, not fatal."""
    while True:
        await asyncio.sleep(interval)
        try:
            while step():
                await asyncio.sleep(0)
        except Exception:
            log.exception("%s failed", name)
