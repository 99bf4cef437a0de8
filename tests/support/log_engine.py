"""The one place the log tests build a queue engine, so a change to its constructor (or to how the engine's
records reach a log) is a change here only."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ferrymq.clock import Clock, ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import Record
from ferrymq.storage.log.writer import LogWriter

RECEIPT_KEY = b"log-tests-receipt-key-0123456789"


def new_engine(clock: Clock | None = None, on_record: Callable[[Record], None] | None = None) -> Engine:
    return Engine(clock if clock is not None else ManualClock(), RECEIPT_KEY, on_record)


def replayed(records: Iterable[Record]) -> Engine:
    """An engine fed ``records`` (what recovery or a follower rebuilds from them)."""
    engine = new_engine()
    for record in records:
        engine.apply(record)
    return engine


def appending(writer: LogWriter, epoch: int = 0) -> Callable[[Record], None]:
    """An engine's ``on_record`` that appends to ``writer`` under ``epoch``, as the worker's does."""

    def append(record: Record) -> None:
        writer.append(record, epoch)

    return append
