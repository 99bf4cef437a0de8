"""Compaction folds without the message bodies, reads them back from disk, and leaves dropped queues out."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from pathlib import Path

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Redrive
from ferrymq.storage.engine.fold import Removals
from ferrymq.storage.engine.records import BATCH, RESTORED, SENT, STORED, Record
from ferrymq.storage.log.body_refs import BodyRef
from ferrymq.storage.log.compaction import compact_segments
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.segments import list_segments
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.server import fold
from tests.support.engine_requests import fifo_message
from tests.support.log_engine import new_engine, replayed

RETENTION = 3600
BIG = "b" * 5000


def _attrs(n: int) -> dict:
    return {"n": {"DataType": "Number", "StringValue": str(n)}}


async def _write(directory: Path, records: list[Record]) -> None:
    writer = LogWriter(directory, recover(directory, lambda r: None), segment_bytes=16 * 1024, max_batch=8)
    for record in records:
        writer.append(record, 0)
    await writer.close()


def _workload() -> tuple[list[Record], object]:
    """Standard and FIFO queues with large bodies and attributes, a dead-letter move (a BATCH), deletes."""
    clock = ManualClock(1_700_000_000.0)
    records: list[Record] = []
    engine = new_engine(clock, on_record=records.append)
    for i in range(60):
        engine.send("std", [[f"s{i}", f"{BIG}{i}", _attrs(i), "md5", "md5a", 0, {}]], RETENTION)
        engine.store("fifo.fifo", [fifo_message("g", f"{BIG}f{i}", message_id=f"f{i}")], RETENTION, fifo=True)
        engine.send("tiny", [[f"t{i}", "t", {}, "md5", None, 0, {}]], RETENTION)
        clock.advance(0.01)
    redrive = Redrive(1, "dlq", False, "arn:aws:sqs:us-east-1:000000000000:std", True)
    for _ in range(3):
        rows = engine.poll("std", 10, 0, RETENTION, redrive=redrive).rows
        engine.delete("std", [rows[0][1]])
        clock.advance(1)
    engine.send("gone", [[f"g{i}", BIG, {}, "md5", None, 0, {}] for i in range(5)], RETENTION)
    return records, engine


def _bodies(records: Iterable[Record]) -> Iterator[object]:
    for record in records:
        if record[0] == BATCH:
            yield from _bodies(record[1])
        elif record[0] in (SENT, STORED):
            yield from (item[1] for item in record[4 if record[0] == SENT else 5])
        elif record[0] == RESTORED:
            yield from (item[2] for item in record[2])


def test_compaction_reads_bodies_back_and_replays_to_the_same_state(tmp_path: Path) -> None:
    # given a log whose sealed segments hold large bodies, attributes, FIFO messages and a dead-letter move
    records, engine = _workload()
    asyncio.run(_write(tmp_path, records))
    sealed = list_segments(tmp_path)[:-1]
    assert len(sealed) > 2
    seen: list[object] = []

    def spying_fold(folded: Iterator[Record], removals: Removals) -> Iterable[Record]:
        def watch() -> Iterator[Record]:
            for record in folded:
                seen.extend(_bodies([record]))
                yield record

        return fold(watch(), removals)

    # when they are compacted, twice (the second time the base segment's RESTORED bodies are references too)
    compact_segments(tmp_path, sealed, spying_fold)
    asyncio.run(_write(tmp_path, []))
    compact_segments(tmp_path, list_segments(tmp_path), spying_fold)
    # then the fold never held a large body, only references, while short bodies stayed in place
    assert seen and all(isinstance(b, BodyRef) or len(b) <= 64 for b in seen)
    assert any(isinstance(b, BodyRef) for b in seen) and "t" in seen
    # and the compacted log replays to exactly the state the full history gave, bodies and attributes included
    got: list[Record] = []
    recover(tmp_path, got.append)
    assert replayed(got).state() == engine.state()
    assert replayed(got).meta_state() == engine.meta_state()


def test_compaction_leaves_out_queues_the_worker_no_longer_has(tmp_path: Path) -> None:
    # given a log in which queue "gone" still has messages, but the worker dropped it since (in a later segment)
    records, engine = _workload()
    asyncio.run(_write(tmp_path, records))
    engine.drop_queue("gone")
    sealed = list_segments(tmp_path)[:-1]
    # when compaction keeps only the queues the worker holds
    compact_segments(tmp_path, sealed, fold, keep_queues=frozenset(engine.queues))
    # then the new base holds nothing of "gone", and what it holds replays to the worker's state
    got: list[Record] = []
    recover(tmp_path, got.append)
    assert not any(r[0] != BATCH and len(r) > 1 and r[1] == "gone" for r in got)
    assert replayed(got).state() == engine.state()
