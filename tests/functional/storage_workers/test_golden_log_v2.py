"""A log written by format version 2, checked in (``tests/fixtures/golden_log_v2``), must recover to the
segments, offsets, epoch history and state recorded beside it: a change to the segment header, the frames,
the commit marker, the record codec or a record's meaning that breaks logs already on disk fails here."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from ferrymq.storage.engine.records import BATCH
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.epochs import EpochHistory
from ferrymq.storage.log.format import (
    BASE,
    COMMIT,
    ENGINE_FLAGS,
    EPOCHS,
    RECORD,
    SNAPSHOT,
    VERSION,
    decode_header,
    encode_commit,
    encode_frame,
    encode_header,
    scan_frames,
)
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.writer import LogWriter
from tests.fixtures.golden_log import as_json
from tests.fixtures.golden_log_v2 import EXPECTED, SEGMENTS
from tests.support.log_engine import new_engine

FORMAT_2_KINDS = set(range(1, 19))
"""The record kinds format version 2 has (those of version 1: SENT .. ATTEMPTS)."""


def fixture_copy(tmp_path: Path) -> Path:
    """The fixture in a directory of its own: recovery may clean up the files it recovers."""
    directory = tmp_path / "log"
    shutil.copytree(SEGMENTS, directory)
    return directory


def test_the_golden_log_recovers_to_the_segments_offsets_epochs_and_state_recorded_with_it(tmp_path: Path) -> None:
    # given the log as a worker left it, and what it was written to hold
    directory = fixture_copy(tmp_path)
    expected = json.loads(EXPECTED.read_text())
    # when it is recovered into an engine
    engine = new_engine()
    log = recover(directory, engine.apply)
    # then every segment remains, with its offsets, the first of them the base written by compaction
    assert [
        {"index": s.index, "flags": s.flags, "size": s.size, "version": s.version, "first_offset": s.first_offset,
         "end_offset": s.end_offset}
        for s in log.segments
    ] == [{k: v for k, v in s.items() if not k.startswith("snapshot")} for s in expected["segments"]]
    assert log.segments[0].flags & BASE
    # and the log's end and epoch history are the recorded ones: epochs 1 and 2 only in the base's history
    assert log.end_offset == expected["end_offset"]
    assert [list(e) for e in log.epochs.entries] == expected["epochs"]
    assert log.last_epoch == expected["last_epoch"]
    # and messages, queue types, resend windows, receive attempts and move tasks are the recorded ones
    assert as_json(engine.state()) == expected["state"]
    assert as_json(engine.meta_state()) == expected["meta_state"]
    assert engine.next_seq == expected["next_seq"]
    assert as_json(engine.active_move_tasks()) == expected["active_move_tasks"]
    # and reading it for replication gives the recorded epochs and offsets
    writer = LogWriter(directory, log)
    assert [[e, o] for e, o, _ in writer.read_from(log.start_offset)] == expected["records"]
    asyncio.run(writer.close())
    # and recovery (and the writer going on from it) changed no file
    for original in SEGMENTS.iterdir():
        assert (directory / original.name).read_bytes() == original.read_bytes()


def test_headers_and_frames_of_the_golden_log_encode_back_to_the_same_bytes() -> None:
    expected = {s["index"]: s for s in json.loads(EXPECTED.read_text())["segments"]}
    seen: set[int] = set()
    for path in sorted(SEGMENTS.iterdir()):
        data = path.read_bytes()
        # given each segment's header: today's encoder writes the same bytes for it
        header = decode_header(data)
        assert header.version == VERSION
        segment = expected[int(path.name.split(".")[0])]
        assert data[: header.size] == encode_header(
            header.flags, segment["first_offset"], segment["snapshot_offset"], segment["snapshot_epoch"]
        )
        # and each frame: decoded and encoded again by today's code, it is the same bytes, so what a worker
        # writes now, a worker that reads the fixture's format reads too
        start = batch_start = header.size
        for frame in scan_frames(data, header.size):
            seen.add(frame.flags)
            if frame.flags in ENGINE_FLAGS:
                payload = codec.encode(codec.decode(frame.payload))
            elif frame.flags == EPOCHS:
                payload = EpochHistory.decode(frame.payload).encode()
            if frame.flags == COMMIT:
                again = encode_commit(data[batch_start:start], frame.epoch, frame.offset)
                batch_start = frame.end
            else:
                again = encode_frame(frame.flags, frame.epoch, frame.offset, payload)
            assert again == data[start : frame.end], (path.name, start)
            start = frame.end
        assert start == batch_start == len(data), path.name
    assert seen == {RECORD, SNAPSHOT, COMMIT, EPOCHS}


def test_the_golden_log_holds_every_record_kind_of_format_2() -> None:
    kinds: set[int] = set()
    for path in SEGMENTS.iterdir():
        data = path.read_bytes()
        for frame in scan_frames(data, decode_header(data).size):
            if frame.flags not in ENGINE_FLAGS:
                continue
            record = codec.decode(frame.payload)
            kinds.add(record[0])
            if record[0] == BATCH:
                kinds.update(inner[0] for inner in record[1])
    assert kinds == FORMAT_2_KINDS
