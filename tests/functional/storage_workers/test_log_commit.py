"""The per-batch commit frame on real files: a torn last batch is cut even with intact records in it, damage
to a batch that a later write proves synced is refused, and salvage leaves a log whose batches commit."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from ferrymq.storage.engine.records import SENT
from ferrymq.storage.log.format import COMMIT, RECORD, CorruptSegment, commit_matches, commit_start
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.salvage import salvage
from ferrymq.storage.log.segments import DamagedLog, list_segments, segment_path
from tests.support.log_files import commits_of, flip, frames_of, write_batches, zero

LOGGER = "ferrymq.storage.log.recovery"


def sent(seq: int, body: str = "x" * 40) -> tuple:
    return (SENT, "q", 1_700_000_000_000, seq, [[str(uuid.UUID(int=seq)), body, {}, "md5", None, 0, {}]])


def seqs(directory: Path) -> list[int]:
    got: list[tuple] = []
    recover(directory, got.append)
    return [r[3] for r in got]


def three_batches(directory: Path) -> Path:
    """Batches of records 1-2, 3-5 and 6-9, each synced before the next; returns the segment."""
    write_batches(directory, [[sent(1), sent(2)], [sent(3), sent(4), sent(5)], [sent(6), sent(7), sent(8), sent(9)]])
    return segment_path(directory, 1)


def test_every_batch_ends_with_one_commit_that_covers_it(tmp_path: Path) -> None:
    # given three batches written by the writer
    path = three_batches(tmp_path)
    data = path.read_bytes()
    # then the segment holds three commits, each right after its batch's records, matching their bytes and
    # naming the batch's last offset
    commits = commits_of(path)
    assert [c.offset for c in commits] == [2, 5, 9]
    assert all(commit_matches(data, c) for c in commits)
    frames = frames_of(path)
    assert [f.flags for f in frames] == [RECORD] * 2 + [COMMIT] + [RECORD] * 3 + [COMMIT] + [RECORD] * 4 + [COMMIT]
    assert [commit_start(c) for c in commits] == [frames[0].start, frames[3].start, frames[7].start]
    assert frames[-1].end == len(data)


def test_a_hole_in_the_middle_of_the_last_batch_with_intact_records_after_it_is_a_torn_tail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # given a last batch whose second record's page never reached the disk while the records after it and
    # its commit did (a power cut that persisted the batch's pages out of order)
    path = three_batches(tmp_path)
    frames = frames_of(path)
    last_batch_start = frames[7].start
    zero(path, frames[8].start + 5, frames[8].end - 5)
    assert [f.flags for f in frames_of(path)][-1] == RECORD  # the scan stops in the hole
    # when the log is recovered
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        got = seqs(tmp_path)
    # then the whole last batch is cut (its commit does not match it: never synced, never acknowledged), the
    # intact records after the hole too, with a warning; the batches before it stay
    assert got == [1, 2, 3, 4, 5]
    assert path.stat().st_size == last_batch_start
    assert f"cutting a torn tail of {frames[-1].end - last_batch_start} bytes at byte {last_batch_start}" in caplog.text
    # and the log goes on at the offset after the last batch kept
    write_batches(tmp_path, [[sent(10)]])
    assert seqs(tmp_path) == [1, 2, 3, 4, 5, 10]
    assert [f.offset for f in frames_of(path) if f.flags == RECORD][-1] == 6


def test_a_last_batch_whose_commit_never_reached_the_disk_is_cut_though_its_records_are_intact(
    tmp_path: Path,
) -> None:
    # given a last batch whose every record is intact but whose commit frame is torn, or missing
    for cut_at in (-5, -29):
        directory = tmp_path / str(-cut_at)
        path = three_batches(directory)
        data = path.read_bytes()
        path.write_bytes(data[:cut_at])
        # when recovered, then the batch is cut: a batch is acknowledged only once its commit is synced
        assert seqs(directory) == [1, 2, 3, 4, 5]
        assert path.stat().st_size == frames_of(path)[-1].end


def test_damage_in_a_batch_before_a_committed_one_is_refused(tmp_path: Path) -> None:
    # given a hole in the second batch, and the third batch committed after it
    path = three_batches(tmp_path)
    frames = frames_of(path)
    zero(path, frames[4].start + 5, frames[4].end - 5)
    before = path.read_bytes()
    # when recovered, then that is damage: the third batch was written only after the second was synced
    with pytest.raises(DamagedLog, match="the batch was synced") as raised:
        seqs(tmp_path)
    assert raised.value.ranges[0].offset == frames[4].start
    assert path.read_bytes() == before


def test_a_damaged_commit_of_an_earlier_batch_is_refused(tmp_path: Path) -> None:
    path = three_batches(tmp_path)
    commit = commits_of(path)[0]
    flip(path, commit.start + 25)
    with pytest.raises(DamagedLog) as raised:
        seqs(tmp_path)
    assert raised.value.ranges[0].offset == commit.start


def test_a_damaged_batch_with_its_own_commit_and_a_later_torn_batch_is_refused(tmp_path: Path) -> None:
    # given a hole in the third batch, whose commit is intact, followed by part of a fourth batch that was
    # being written when the machine died (intact frames, no commit)
    path = three_batches(tmp_path)
    frames = frames_of(path)
    zero(path, frames[8].start + 5, frames[8].end - 5)
    torn = tmp_path / "torn"
    write_batches(torn, [[sent(i) for i in range(1, 10)], [sent(10), sent(11)]])
    fourth = frames_of(segment_path(torn, 1))
    with open(path, "ab") as f:
        f.write(segment_path(torn, 1).read_bytes()[fourth[-3].start : fourth[-1].start])
    # when recovered, then the third batch is damage: something was written after it, so it had been synced
    with pytest.raises(DamagedLog, match="the batch was synced"):
        seqs(tmp_path)


def test_a_lost_segment_in_the_middle_of_the_log_is_refused(tmp_path: Path) -> None:
    # given a log over several segments, one of which went missing
    write_batches(tmp_path, [[sent(i, "y" * 300)] for i in range(1, 12)], segment_bytes=700)
    indexes = list_segments(tmp_path)
    assert len(indexes) > 3
    segment_path(tmp_path, indexes[2]).unlink()
    # when recovered, then the gap in offsets names it
    with pytest.raises(CorruptSegment, match="records between them are missing"):
        seqs(tmp_path)


# --- salvage ------------------------------------------------------------------------------------------------


def test_salvage_cuts_a_hole_and_leaves_batches_that_recover_with_their_offsets(tmp_path: Path) -> None:
    # given a hole in the second of three batches, in record 4 (recovery refuses it)
    path = three_batches(tmp_path)
    frames = frames_of(path)
    zero(path, frames[4].start + 5, frames[4].end - 5)
    # when salvaged
    report = salvage(tmp_path)
    # then the hole is cut, every intact record kept, and each run of them committed anew
    assert [(r.offset, r.end) for r in report.ranges] == [(frames[4].start, frames[4].end)]
    assert report.records == 8
    data = path.read_bytes()
    assert all(commit_matches(data, c) for c in commits_of(path))
    assert seqs(tmp_path) == [1, 2, 3, 5, 6, 7, 8, 9]
    # and the records keep their offsets (a gap where the cut one was), and the log goes on after them
    assert [f.offset for f in frames_of(path) if f.flags == RECORD] == [1, 2, 3, 5, 6, 7, 8, 9]
    write_batches(tmp_path, [[sent(10)]])
    assert recover(tmp_path, lambda _: None).end_offset == 11


def test_salvage_cuts_an_uncommitted_last_batch_as_recovery_would(tmp_path: Path) -> None:
    # given a hole in the last batch, with intact records after it
    path = three_batches(tmp_path)
    frames = frames_of(path)
    zero(path, frames[8].start + 5, frames[8].end - 5)
    # when salvaged, then the whole last batch is cut and said to be one that was never committed
    report = salvage(tmp_path)
    assert [(r.offset, r.end) for r in report.ranges] == [(frames[7].start, frames[-1].end)]
    assert "never committed" in (report.segments[0].note or "")
    assert report.records == 5
    assert seqs(tmp_path) == [1, 2, 3, 4, 5]


def test_salvage_of_a_sealed_segments_last_records_keeps_it_meeting_the_next_segment(tmp_path: Path) -> None:
    # given a sealed segment whose last batch is damaged, and a segment after it
    write_batches(tmp_path, [[sent(1), sent(2)], [sent(3), sent(4)]], segment_bytes=400)
    write_batches(tmp_path, [[sent(5)]])
    first, second = list_segments(tmp_path)[:2]
    frames = frames_of(segment_path(tmp_path, first))
    assert [f.offset for f in frames if f.flags == RECORD] == [1, 2, 3, 4]
    zero(segment_path(tmp_path, first), frames[3].start + 5, frames[-1].end)
    # when salvaged
    salvage(tmp_path)
    # then the records left recover, and the next segment still starts where the log before it ends
    assert seqs(tmp_path) == [1, 2, 5]
    assert recover(tmp_path, lambda _: None).segments[1].first_offset == 5
    assert second in list_segments(tmp_path)
