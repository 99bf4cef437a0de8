"""Recovery and compaction read segments a window at a time (``reading.WindowedWalk``): memory holds a window
and the batch being completed, never a whole segment, and what they find is what a walk of the whole file
finds, whatever the window: every record and where it lies, torn tails cut, damage named at the same bytes."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from ferrymq.storage.log import reading
from ferrymq.storage.log.format import RECORD
from ferrymq.storage.log.reading import SealedSegments
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.segments import DamagedLog, list_segments, segment_path
from tests.functional.storage_workers.test_log import sent
from tests.support.log_files import flip, frames_of, write_batches


def recovered(directory: Path) -> tuple[list[Any], list[tuple[int, int, int]], list[Any], int]:
    records: list[Any] = []
    where: list[tuple[int, int, int]] = []
    result = recover(directory, records.append, located=lambda *at: where.append(at))
    return records, where, result.segments, result.end_offset


WHOLE = 64 * 1024 * 1024
"""A window larger than any segment these tests write: the whole file at once."""


def sealed_frames_of(directory: Path) -> list[tuple[int, int, int]]:
    """``(segment, offset, file position)`` of every frame, as compaction reads each segment."""
    return [
        (index, frame.offset, frame.start)
        for index in list_segments(directory)
        for _, frame in SealedSegments(directory, [index])
    ]


def a_log(directory: Path, batches: int = 30, per_batch: int = 7, **writer_args: Any) -> None:
    write_batches(
        directory,
        [[sent("q", b * per_batch + i, f"body {b}-{i} " + "x" * (i * 37)) for i in range(per_batch)]
         for b in range(batches)],
        **writer_args,
    )


@pytest.mark.parametrize("window", [1, 97, 4096, 1 << 20])
def test_any_window_finds_what_the_whole_file_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    a_log(tmp_path, segment_bytes=16 * 1024)
    assert len(list_segments(tmp_path)) > 1
    monkeypatch.setattr(reading, "WALK_WINDOW_BYTES", WHOLE)
    whole = recovered(tmp_path)
    whole_frames = sealed_frames_of(tmp_path)
    monkeypatch.setattr(reading, "WALK_WINDOW_BYTES", window)
    windowed = recovered(tmp_path)
    # the same records, at the same places, in the same segments, to the same end
    assert windowed[0] == whole[0] and windowed[1] == whole[1]
    assert windowed[2:] == whole[2:]
    # and each place is where the record's payload lies in the file
    for index, position, length in windowed[1]:
        payloads = {(f.end - len(f.payload), len(f.payload)) for f in frames_of(segment_path(tmp_path, index))}
        assert (position, length) in payloads
    # and compaction's reading of sealed segments finds the same frames at the same file positions
    assert sealed_frames_of(tmp_path) == whole_frames


@pytest.mark.parametrize("window", [61, 1 << 20])
def test_a_torn_tail_is_cut_and_damage_named_at_the_same_bytes_whatever_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    monkeypatch.setattr(reading, "WALK_WINDOW_BYTES", window)
    # a torn tail: the last batch half written
    a_log(tmp_path / "torn")
    last = segment_path(tmp_path / "torn", list_segments(tmp_path / "torn")[-1])
    size = last.stat().st_size
    with open(last, "r+b") as f:
        f.truncate(size - 40)
    records, _, segments, _ = recovered(tmp_path / "torn")
    assert len(records) == 29 * 7 and segments[-1].size == last.stat().st_size < size - 40
    # damage: a record in the middle of a sealed batch
    a_log(tmp_path / "damaged")
    path = segment_path(tmp_path / "damaged", list_segments(tmp_path / "damaged")[-1])
    middle = frames_of(path)[len(frames_of(path)) // 2]
    flip(path, middle.start + 12)
    with pytest.raises(DamagedLog) as found:
        recover(tmp_path / "damaged", lambda _: None)
    assert found.value.ranges[0].offset == middle.start


def test_recovery_and_compaction_hold_a_window_not_the_segment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # given one segment of about 12 MB
    a_log(tmp_path, batches=40, per_batch=150, segment_bytes=1 << 30)
    segment = segment_path(tmp_path, list_segments(tmp_path)[0])
    assert segment.stat().st_size > 10 * 1024 * 1024
    monkeypatch.setattr(reading, "WALK_WINDOW_BYTES", 256 * 1024)
    # when it is recovered, and read as compaction reads sealed segments
    tracemalloc.start()
    try:
        records = 0
        recover(tmp_path, lambda _: None)
        recovery_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        for _, frame in SealedSegments(tmp_path, list_segments(tmp_path)):
            records += frame.flags == RECORD
        sealed_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # then neither held more than a few windows at once
    assert records == 40 * 150
    assert recovery_peak < 3 * 1024 * 1024 and sealed_peak < 3 * 1024 * 1024, (recovery_peak, sealed_peak)
