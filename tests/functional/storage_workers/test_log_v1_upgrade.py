"""A log written by format version 1 (the checked-in golden log) under today's writer: its records take
offsets 1..n and epoch 0, new records go to a version 2 segment after it, and reading, compaction and
truncation work across the two formats."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from ferrymq.storage.engine.records import DROPPED
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.compaction import compact_segments
from ferrymq.storage.log.format import BASE, HEADER_SIZE_V1, VERSION, VERSION_1, decode_header, scan_frames
from ferrymq.storage.log.reading import OffsetCompacted
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.segments import list_segments, segment_path
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.server import fold
from tests.fixtures.golden_log import SEGMENTS
from tests.support.log_engine import new_engine, replayed

NEW = [(DROPPED, "std-dlq"), (DROPPED, "orders.fifo")]
"""Records a worker running today appends to the golden log."""


def fixture_copy(tmp_path: Path) -> Path:
    directory = tmp_path / "log"
    shutil.copytree(SEGMENTS, directory)
    return directory


def v1_payloads() -> list[bytes]:
    """The payload of every record of the fixture, in log order."""
    return [
        bytes(frame.payload)
        for path in sorted(SEGMENTS.iterdir())
        for frame in scan_frames(path.read_bytes(), HEADER_SIZE_V1, VERSION_1)
    ]


def upgraded(directory: Path) -> None:
    """The golden log after a worker of today appended :data:`NEW` to it, under epoch 1."""

    async def run() -> None:
        writer = LogWriter(directory, recover(directory, lambda _: None))
        for record in NEW:
            writer.append(record, 1)
        await writer.close()

    asyncio.run(run())


def test_version_1_records_take_offsets_in_order_and_epoch_0(tmp_path: Path) -> None:
    # given the version 1 golden log
    directory = fixture_copy(tmp_path)
    n = len(v1_payloads())
    # when it is recovered
    log = recover(directory, lambda _: None)
    # then its n records have offsets 1..n, counted across its segments, all of epoch 0
    assert log.end_offset == n + 1
    assert log.epochs.entries == [(0, 1)]
    assert log.segments[0].first_offset == 1
    assert [s.first_offset for s in log.segments[1:]] == [s.end_offset for s in log.segments[:-1]]
    assert all(s.version == VERSION_1 for s in log.segments)
    # and reading from offset 1 gives them so, as the bytes they were written with
    writer = LogWriter(directory, log)
    assert list(writer.read_from(1)) == [(0, offset, p) for offset, p in enumerate(v1_payloads(), start=1)]
    assert [o for _, o, _ in writer.read_from(n - 1)] == [n - 1, n]
    asyncio.run(writer.close())


def test_the_writer_appends_to_a_new_version_2_segment_and_leaves_the_version_1_files_alone(tmp_path: Path) -> None:
    # given the golden log
    directory = fixture_copy(tmp_path)
    n = len(v1_payloads())
    indexes = list_segments(directory)
    # when a worker of today opens it and appends under epoch 1
    upgraded(directory)
    # then the records went to a new version 2 segment that starts at offset n + 1
    assert list_segments(directory) == [*indexes, indexes[-1] + 1]
    header = decode_header(segment_path(directory, indexes[-1] + 1).read_bytes())
    assert (header.version, header.first_offset, header.flags) == (VERSION, n + 1, 0)
    # and the version 1 segments are byte for byte as they were
    for original in SEGMENTS.iterdir():
        assert (directory / original.name).read_bytes() == original.read_bytes()
    # and the log recovers to the golden state plus the new records, with both epochs in its history
    engine = new_engine()
    log = recover(directory, engine.apply)
    golden = replayed(codec.decode(p) for p in v1_payloads())
    for record in NEW:
        golden.apply(record)
    assert engine.state() == golden.state() and engine.meta_state() == golden.meta_state()
    assert log.epochs.entries == [(0, 1), (1, n + 1)]
    assert log.end_offset == n + 3


def test_compaction_folds_version_1_segments_into_a_version_2_base(tmp_path: Path) -> None:
    # given the golden log with a version 2 segment after it
    directory = fixture_copy(tmp_path)
    n = len(v1_payloads())
    upgraded(directory)
    before = recover(directory, lambda _: None)
    state = replayed(_records(directory)).state()
    # when its sealed segments (all version 1) are compacted
    sealed = [s.index for s in before.segments[:-1]]
    base = compact_segments(directory, sealed, fold)
    # then the base is a version 2 one whose snapshot is of offset n, epoch 0, and the state is the same
    header = decode_header(segment_path(directory, base.index).read_bytes())
    assert (header.version, header.flags, header.snapshot_offset, header.snapshot_epoch) == (VERSION, BASE, n, 0)
    after = recover(directory, lambda _: None)
    assert replayed(_records(directory)).state() == state
    assert after.epochs == before.epochs and after.end_offset == before.end_offset
    writer = LogWriter(directory, after)
    with pytest.raises(OffsetCompacted):
        writer.read_from(n)
    assert [o for _, o, _ in writer.read_from(n + 1)] == [n + 1, n + 2]
    asyncio.run(writer.close())


def test_truncating_into_a_version_1_segment_cuts_it_and_goes_on_in_a_version_2_one(tmp_path: Path) -> None:
    # given the golden log with a version 2 segment after it
    directory = fixture_copy(tmp_path)
    upgraded(directory)
    records = [codec.decode(p) for p in v1_payloads()]
    log = recover(directory, lambda _: None)
    middle = log.segments[1]
    keep = middle.first_offset  # the first record of the middle version 1 segment

    async def run() -> None:
        # when cut after the first record of the middle version 1 segment, then appended to
        writer = LogWriter(directory, log)
        await writer.truncate_after(keep)
        assert writer.append(NEW[0], 2) == keep + 1
        await writer.close()

    asyncio.run(run())
    # then that segment keeps its first record (still version 1), the later ones are gone, and a version 2
    # segment after it holds the new record
    assert list_segments(directory) == [log.segments[0].index, middle.index, middle.index + 1]
    assert decode_header(segment_path(directory, middle.index).read_bytes()).version == VERSION_1
    got = _records(directory)
    assert got == [*records[:keep], NEW[0]]
    assert recover(directory, lambda _: None).epochs.entries == [(0, 1), (2, keep + 1)]


def _records(directory: Path) -> list[tuple]:
    got: list[tuple] = []
    recover(directory, got.append)
    return got
