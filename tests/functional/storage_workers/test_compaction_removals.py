"""Compaction's first pass (``ferrymq.storage.log.removals``): what the sealed segments to fold remove, read from
real segment files, a base passed over; and the fold that leaves those messages out rebuilding the same state."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path

import pytest

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine, Redrive
from ferrymq.storage.engine.fold import Removals
from ferrymq.storage.engine.records import DELETED, SENT, Record
from ferrymq.storage.log.compaction import CompactionCancelled, compact_segments
from ferrymq.storage.log.reading import SealedSegments, decode
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.removals import removals_in
from ferrymq.storage.log.segments import list_segments, segment_path
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.server import fold
from tests.support.log_engine import new_engine, replayed

RETENTION = 3600


async def _write(directory: Path, records: list[Record]) -> None:
    writer = LogWriter(directory, recover(directory, lambda r: None), segment_bytes=8 * 1024, max_batch=8)
    for record in records:
        writer.append(record, 0)
    await writer.close()


def _use(engine: Engine, clock: ManualClock, rounds: int, tag: str) -> None:
    """A queue used steadily (sends of ten, half received and deleted, a dead-letter move), another one kept."""
    redrive = Redrive(2, "dlq", False, "arn:aws:sqs:us-east-1:000000000000:std", True)
    for i in range(rounds):
        engine.send("std", [[f"{tag}{i}-{k}", "x" * 100, {}, "md5", None, 0, {}] for k in range(10)], RETENTION)
        engine.send("kept", [[f"{tag}k{i}", "k", {}, "md5", None, 0, {}]], RETENTION)
        rows = engine.poll("std", 10, 0, RETENTION, redrive=redrive).rows
        engine.delete("std", [row[1] for row in rows[::2]])
        clock.advance(0.5)


def _decoded(directory: Path, indexes: list[int]) -> list[Record]:
    """Every record of sealed segments ``indexes``, each decoded."""
    return [decode(frame, path) for _, frame, path in SealedSegments(directory, indexes).engine_frames()]


def _used_log(directory: Path, rounds: int, then: int = 0) -> Engine:
    """A log used for ``rounds``; with ``then``, its sealed segments compacted, and used for ``then`` more."""
    clock = ManualClock(1_700_000_000.0)
    records: list[Record] = []
    engine = new_engine(clock, on_record=records.append)
    _use(engine, clock, rounds, "a")
    asyncio.run(_write(directory, records))
    if then:
        compact_segments(directory, list_segments(directory)[:-1], fold)
        written = len(records)
        _use(engine, clock, then, "b")
        asyncio.run(_write(directory, records[written:]))
    return engine


def test_the_first_pass_finds_every_removal_after_the_base_and_reads_no_base(tmp_path: Path) -> None:
    # given a log compacted once (its first segment a base), then used further
    _used_log(tmp_path, 30, 30)
    sealed = list_segments(tmp_path)[:-1]
    assert len(sealed) > 3
    # when the first pass reads the sealed segments
    found = removals_in(tmp_path, sealed)
    # then it found what the records after the base remove (peeking at each record's kind missed none)
    want = Removals()
    for record in _decoded(tmp_path, sealed[1:]):
        want.note(record)
    assert found == want
    assert found is not None and found.seqs is not None and found.seqs.count() > 0 and found.kept == {"dlq"}
    # and it read nothing of the base past its header: a damaged byte in the base's records goes unseen (the
    # fold's own pass would find it)
    base = segment_path(tmp_path, sealed[0])
    data = bytearray(base.read_bytes())
    data[len(data) // 2] ^= 0xFF
    base.write_bytes(bytes(data))
    assert removals_in(tmp_path, sealed) == want


def test_the_first_pass_reads_the_first_segment_of_a_log_never_compacted(tmp_path: Path) -> None:
    # given a log never compacted: its first segment is a base holding no state, only records
    _used_log(tmp_path, 30)
    sealed = list_segments(tmp_path)[:-1]
    # when the first pass reads its sealed segments, then it found the removals of every one of them
    want = Removals()
    for record in _decoded(tmp_path, sealed):
        want.note(record)
    assert removals_in(tmp_path, sealed) == want
    assert any(record[0] == DELETED for record in _decoded(tmp_path, sealed[:1]))


def test_a_compaction_leaving_out_what_was_sent_and_removed_recovers_to_the_same_state(tmp_path: Path) -> None:
    # given a queue used steadily, with dead-letter moves and a queue whose messages stay, compacted once
    engine = _used_log(tmp_path, 60, 30)
    # when its sealed segments are compacted again, after the base
    compact_segments(tmp_path, list_segments(tmp_path)[:-1], fold)
    # then the log recovers to the state the whole history gave, removed ids for resends included
    got: list[Record] = []
    recover(tmp_path, got.append)
    assert replayed(got).state() == engine.state()
    assert replayed(got).meta_state() == engine.meta_state()


def test_a_compaction_cancelled_during_the_first_pass_changes_nothing(tmp_path: Path) -> None:
    _used_log(tmp_path, 30)
    sealed = list_segments(tmp_path)[:-1]
    before = {i: segment_path(tmp_path, i).read_bytes() for i in sealed}
    cancelled = threading.Event()
    cancelled.set()
    with pytest.raises(CompactionCancelled):
        compact_segments(tmp_path, sealed, fold, cancelled)
    assert {i: segment_path(tmp_path, i).read_bytes() for i in sealed} == before


def test_a_log_removing_a_message_in_another_queue_than_its_own_is_folded_again_with_nothing_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # given a log (not one the engine writes) where a message sent to "a" is deleted under "b"
    ts = 1_700_000_000_000
    records: list[Record] = [
        (SENT, "a", ts, 1, [["m1", "x" * 100, {}, "md5", None, 0, {}], ["m2", "y" * 100, {}, "md5", None, 0, {}]]),
        (SENT, "b", ts, 3, [["m3", "z" * 100, {}, "md5", None, 0, {}]]),
        (DELETED, "b", [1, 3]),
    ]
    asyncio.run(_write(tmp_path, records))
    asyncio.run(_write(tmp_path, [(SENT, "c", ts, 4, [[f"c{i}", "c" * 2000, {}, "md5", None, 0, {}]]) for i in
                                  range(8)]))
    sealed = list_segments(tmp_path)[:-1]
    assert len(sealed) >= 1
    # when it is compacted
    with caplog.at_level(logging.WARNING):
        compact_segments(tmp_path, sealed, fold)
    # then the fold that left message 1 out was found wrong and done again replaying everything, as named in the log
    assert any("folding segments" in r.getMessage() and "again" in r.getMessage() for r in caplog.records)
    got: list[Record] = []
    recover(tmp_path, got.append)
    state = replayed(got).state()
    assert ([row[1] for row in state["a"]] == ["m1", "m2"] and "b" not in state) or not state.get("b")
