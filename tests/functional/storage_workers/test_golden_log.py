"""A log written by format version 1, checked in (``tests/fixtures/golden_log``), must recover to the state
recorded beside it: a change to the segment format, the record codec or a record's meaning that breaks logs
already on disk fails here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ferrymq.storage.engine.records import BATCH
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.format import BASE, HEADER_SIZE_V1, VERSION_1, decode_header, encode_frame_v1, scan_frames
from ferrymq.storage.log.recovery import recover
from tests.fixtures.golden_log import EXPECTED, SEGMENTS, as_json
from tests.support.log_engine import new_engine

FORMAT_1_KINDS = set(range(1, 19))
"""The record kinds format version 1 has (SENT .. ATTEMPTS)."""


def fixture_copy(tmp_path: Path) -> Path:
    """The fixture in a directory of its own: recovery may clean up the files it recovers."""
    directory = tmp_path / "log"
    shutil.copytree(SEGMENTS, directory)
    return directory


def test_the_golden_log_recovers_to_the_state_recorded_with_it(tmp_path: Path) -> None:
    # given the log as a worker left it, and the state it was written to hold
    directory = fixture_copy(tmp_path)
    expected = json.loads(EXPECTED.read_text())
    # when it is recovered into an engine
    engine = new_engine()
    segments = recover(directory, engine.apply).segments
    # then every segment remains, the first of them the base written by compaction
    assert [{"index": s.index, "flags": s.flags, "size": s.size} for s in segments] == expected["segments"]
    assert segments[0].flags & BASE
    # and messages, queue types, resend windows, receive attempts and move tasks are the recorded ones
    assert as_json(engine.state()) == expected["state"]
    assert as_json(engine.meta_state()) == expected["meta_state"]
    assert engine.next_seq == expected["next_seq"]
    assert as_json(engine.active_move_tasks()) == expected["active_move_tasks"]
    # and recovery changed no file
    for original in SEGMENTS.iterdir():
        assert (directory / original.name).read_bytes() == original.read_bytes()


def test_records_of_the_golden_log_encode_back_to_the_same_bytes() -> None:
    # given every record frame of the fixture
    for path in sorted(SEGMENTS.iterdir()):
        data = path.read_bytes()
        header = decode_header(data)
        assert header.version == VERSION_1
        start = header.size
        for frame in scan_frames(data, start, VERSION_1):
            # when it is decoded and encoded again by today's codec, then it is the same frame: the payload
            # bytes a worker writes now (in version 2 frames) are the ones the fixture's format holds
            assert encode_frame_v1(codec.encode(codec.decode(frame.payload))) == data[start : frame.end], (
                path.name,
                start,
            )
            start = frame.end
        assert start == len(data), path.name


def test_the_golden_log_holds_every_record_kind_of_format_1() -> None:
    kinds: set[int] = set()
    for path in SEGMENTS.iterdir():
        for frame in scan_frames(path.read_bytes(), HEADER_SIZE_V1, VERSION_1):
            record = codec.decode(frame.payload)
            kinds.add(record[0])
            if record[0] == BATCH:
                kinds.update(inner[0] for inner in record[1])
    assert kinds == FORMAT_1_KINDS
