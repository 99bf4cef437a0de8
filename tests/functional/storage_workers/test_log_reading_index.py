"""Reading a log from an offset through the per-segment index: what a FETCH costs in bytes read, on real files.

A FETCH from any offset must read about what it returns, not the segment around it; the index that makes it so
must never make a read wrong (after truncation, across segments, with batches larger than a read window) or
hide damage."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from ferrymq.storage.log.reading import INDEX_STEP_BYTES, READ_WINDOW_BYTES, LogReader, SegmentIndexes
from ferrymq.storage.log.segments import DamagedLog, SegmentInfo, segment_path
from ferrymq.storage.log.writer import LogWriter
from tests.functional.storage_workers.test_log_offsets import sent

BODY = "b" * 1000
RECORDS = 4000


def big_log(directory: Path, *, records: int = RECORDS, segment_bytes: int = 64 * 1024 * 1024) -> list[SegmentInfo]:
    """``records`` records of about 1 KiB in batches of 10; the segments they fill."""

    async def run() -> list[SegmentInfo]:
        writer = LogWriter(directory, segment_bytes=segment_bytes)
        for seq in range(1, records + 1):
            writer.append(sent(seq, BODY), 1)
            if seq % 10 == 0:
                await writer.flush()
        await writer.close()
        return list(writer.segments)

    return asyncio.run(run())


def take(reader: LogReader, n: int) -> list[int]:
    offsets = []
    with reader:
        for _, offset, _ in reader:
            offsets.append(offset)
            if len(offsets) == n:
                break
    return offsets


def test_a_read_from_any_offset_reads_about_what_it_returns_once_the_segment_was_walked(tmp_path: Path) -> None:
    # given a 4 MiB segment, walked once from its start (what a follower catching up from offset 1 does)
    segments = big_log(tmp_path)
    assert segments[-1].size > 16 * READ_WINDOW_BYTES
    indexes = SegmentIndexes()
    assert len(take(LogReader(tmp_path, segments, 1, indexes), RECORDS)) == RECORDS
    # when FETCH-sized reads start at offsets spread over the segment
    for offset in (2, 1234, 2500, 3999, RECORDS):
        reader = LogReader(tmp_path, segments, offset, indexes)
        got = take(reader, 20)
        # then each returns the records from its offset on, in order
        assert got == list(range(offset, min(offset + 20, RECORDS + 1)))
        # and reads at most one index step before its offset and one window: not the segment
        assert reader.bytes_read <= INDEX_STEP_BYTES + 2 * READ_WINDOW_BYTES, (offset, reader.bytes_read)


def test_without_the_index_every_read_walks_from_the_segments_start(tmp_path: Path) -> None:
    # given the same segment, read with a fresh index each time (what every FETCH cost before the index)
    segments = big_log(tmp_path)
    reader = LogReader(tmp_path, segments, 3999, SegmentIndexes())
    assert take(reader, 1) == [3999]
    # then the read walked nearly the whole segment: the cost the shared index takes away
    assert reader.bytes_read > segments[-1].size // 2


def test_reads_from_random_offsets_match_a_walk_of_the_whole_log_across_segments(tmp_path: Path) -> None:
    # given a log over several segments, some of them never walked before
    segments = big_log(tmp_path, records=3000, segment_bytes=700 * 1024)
    assert len(segments) >= 4
    everything = list(LogReader(tmp_path, segments, 1))
    assert [o for _, o, _ in everything] == list(range(1, 3001))
    indexes = SegmentIndexes()
    rng = random.Random(7)
    for _ in range(40):
        offset = rng.randint(1, 3000)
        # when reading from that offset through the shared index
        got = list(LogReader(tmp_path, segments, offset, indexes))
        # then it is exactly the tail of the whole log, payloads included
        assert got == everything[offset - 1 :]


def test_after_a_truncation_the_index_of_the_cut_segment_is_not_trusted(tmp_path: Path) -> None:
    async def run() -> None:
        writer = LogWriter(tmp_path)
        for seq in range(1, 2001):
            writer.append(sent(seq, BODY), 1)
            if seq % 10 == 0:
                await writer.flush()
        await writer.flush()
        # given the segment walked and indexed
        assert len(take(writer.read_from(1), 2000)) == 2000
        # when the log is cut in place to offset 500 and different records follow (another leader's)
        await writer.truncate_after(500)
        for seq in range(501, 2501):
            writer.append(sent(seq + 100_000, "c" * 333), 2)
            if seq % 7 == 0:
                await writer.flush()
        await writer.flush()
        # then reading from any offset gives the new records, never bytes at a stale position
        for offset in (400, 501, 1500, 2400):
            got = list(writer.read_from(offset))
            assert [o for _, o, _ in got] == list(range(offset, 2501))
            assert all(epoch == (1 if o <= 500 else 2) for epoch, o, _ in got)
        await writer.close()

    asyncio.run(run())


def test_a_batch_larger_than_a_read_window_is_read_whole(tmp_path: Path) -> None:
    async def run() -> None:
        writer = LogWriter(tmp_path)
        writer.append(sent(1), 1)
        await writer.flush()
        # given one batch of 8 records of 100 KiB each (over three read windows) between small ones
        for seq in range(2, 10):
            writer.append(sent(seq, "x" * 100 * 1024), 1)
        await writer.flush()
        writer.append(sent(10), 1)
        await writer.flush()
        # when read from the start and from inside the big batch
        assert [o for _, o, _ in writer.read_from(1)] == list(range(1, 11))
        assert [o for _, o, _ in writer.read_from(5)] == list(range(5, 11))
        await writer.close()

    asyncio.run(run())


def test_damage_in_a_window_past_the_first_is_still_named(tmp_path: Path) -> None:
    # given a log whose segment is damaged 2 MiB in, past several read windows
    segments = big_log(tmp_path, records=3000)
    path = segment_path(tmp_path, segments[-1].index)
    data = bytearray(path.read_bytes())
    data[2 * 1024 * 1024] ^= 0xFF
    path.write_bytes(bytes(data))
    # when a reader walks across it
    reader = LogReader(tmp_path, segments, 1)
    # then it stops with the damage named, after returning only records before it
    offsets = []
    with pytest.raises(DamagedLog) as caught:
        for _, offset, _ in reader:
            offsets.append(offset)
    assert offsets == list(range(1, len(offsets) + 1))
    assert 1000 < len(offsets) < 3000
    damaged = caught.value.ranges[0]
    assert damaged.offset <= 2 * 1024 * 1024 < damaged.offset + damaged.length
