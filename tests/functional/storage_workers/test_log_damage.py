"""Damage in the worker log on real files: recovery refuses what is not a torn tail, salvage cuts it explicitly."""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import pytest

from ferrymq.storage.engine.records import PURGED, SENT
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.compaction import compact_segments
from ferrymq.storage.log.epochs import EpochHistory
from ferrymq.storage.log.format import (
    BASE,
    EPOCHS,
    HEADER_SIZE,
    RECORD,
    SNAPSHOT,
    CorruptSegment,
    encode_commit,
    encode_frame,
    encode_header,
    scan_frames,
)
from ferrymq.storage.log.lock import DirectoryInUse, locked
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.salvage import SalvageRefused, salvage
from ferrymq.storage.log.segments import DamagedLog, list_segments, segment_path
from ferrymq.storage.server.maintenance import fold
from tests.support.log_files import flip, frames_of, write_batches, write_v1_log


def sent(seq: int, body: str = "x") -> tuple:
    return (SENT, "q", 1_700_000_000_000, seq, [[str(uuid.UUID(int=seq)), body, {}, "md5", None, 0, {}]])


def batch(*frames: bytes) -> bytes:
    """``frames`` and their commit, as the writer writes a batch."""
    data = b"".join(frames)
    return data + encode_commit(data, 0, 0)


def seqs(directory: Path) -> list[int]:
    got: list[tuple] = []
    recover(directory, got.append)
    return [r[3] for r in got]


def write(directory: Path, records: list[tuple], **kwargs: object) -> None:
    """Each record its own synced batch: every one of them was acknowledged."""
    write_batches(directory, [[r] for r in records], **kwargs)


def record_spans(path: Path) -> list[tuple[int, int]]:
    """``(start, end)`` of each record frame of segment ``path``."""
    return [(f.start, f.end) for f in frames_of(path) if f.flags == RECORD]


def test_a_damaged_record_before_intact_ones_stops_recovery_and_cuts_nothing(tmp_path: Path) -> None:
    # given three records, each synced, and one byte of the second flipped
    write(tmp_path, [sent(1), sent(2), sent(3)])
    path = segment_path(tmp_path, 1)
    (_, _), (start, end), _ = record_spans(path)
    flip(path, start + 30)
    damaged = path.read_bytes()
    # when the log is recovered
    with pytest.raises(DamagedLog) as raised:
        seqs(tmp_path)
    # then the error names the segment, the byte position and the damaged range (up to its batch's commit)
    message = str(raised.value)
    assert str(path) in message
    assert f"at byte {start}" in message
    assert f"bytes {start}..{end} ({end - start} bytes)" in message
    assert raised.value.ranges[0].offset == start
    # and the segment is exactly as it was
    assert path.read_bytes() == damaged


def test_a_damaged_length_is_damage_too_when_an_intact_record_follows(tmp_path: Path) -> None:
    # given a record whose length field is hit: the scan loses its footing there
    write(tmp_path, [sent(i) for i in range(1, 6)])
    path = segment_path(tmp_path, 1)
    spans = record_spans(path)
    size = path.stat().st_size
    flip(path, spans[2][0])
    # when recovered, then the resync still finds the frames after it, so nothing is cut
    with pytest.raises(DamagedLog) as raised:
        seqs(tmp_path)
    assert (raised.value.ranges[0].offset, raised.value.ranges[0].end) == spans[2]
    assert path.stat().st_size == size


def test_every_damaged_range_is_counted_in_the_error(tmp_path: Path) -> None:
    # given five records with the second and the fourth damaged
    write(tmp_path, [sent(i) for i in range(1, 6)])
    path = segment_path(tmp_path, 1)
    spans = record_spans(path)
    flip(path, spans[1][0] + 30)
    flip(path, spans[3][0] + 30)
    # when recovered, then the error names the first range and counts the other
    with pytest.raises(DamagedLog, match="1 more damaged range") as raised:
        seqs(tmp_path)
    assert [(r.offset, r.end) for r in raised.value.ranges] == [spans[1], spans[3]]


def test_a_torn_tail_with_nothing_intact_after_it_is_cut_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # given two synced records, then half a record and zeros, as a crash during the next batch leaves them
    write(tmp_path, [sent(1), sent(2)])
    path = segment_path(tmp_path, 1)
    intact = path.stat().st_size
    with open(path, "ab") as f:
        f.write(encode_frame(RECORD, 0, 3, codec.encode(sent(3)))[:30] + b"\0" * 4000)
    # when the log is recovered
    with caplog.at_level(logging.WARNING, logger="ferrymq.storage.log.recovery"):
        assert seqs(tmp_path) == [1, 2]
    # then the tail is cut, and the warning says how much
    assert path.stat().st_size == intact
    assert f"cutting a torn tail of 4030 bytes at byte {intact}" in caplog.text


def test_damage_in_a_sealed_segment_names_its_range(tmp_path: Path) -> None:
    # given a log over several segments, with damage at the end of the first (which was all synced)
    write(tmp_path, [sent(i, "y" * 200) for i in range(1, 30)], segment_bytes=1024)
    first = segment_path(tmp_path, list_segments(tmp_path)[0])
    size = first.stat().st_size
    flip(first, size - 3)
    # when recovered, then the error names the segment and a range that runs to its end
    with pytest.raises(DamagedLog) as raised:
        seqs(tmp_path)
    (damage,) = raised.value.ranges
    assert damage.end == size
    assert f"{first}: damaged frame at byte {damage.offset}: bytes {damage.offset}..{size}" in str(raised.value)
    assert "sealed" in str(raised.value)


def test_a_last_segment_whose_header_is_damaged_under_records_is_not_removed(tmp_path: Path) -> None:
    # given records in segment 2, whose header (synced before any record) is later damaged
    write(tmp_path, [sent(1)], segment_bytes=1)
    write(tmp_path, [sent(2), sent(3)])
    assert list_segments(tmp_path) == [1, 2]
    last = segment_path(tmp_path, 2)
    flip(last, 3)
    # when recovered, then that is an error, and the segment stays
    with pytest.raises(CorruptSegment, match="nothing was removed"):
        seqs(tmp_path)
    assert list_segments(tmp_path) == [1, 2]


def test_a_readable_checksum_around_an_unreadable_record_is_an_error_naming_its_offset(tmp_path: Path) -> None:
    # given a committed frame whose CRC matches but whose payload is not a record (written so, not damaged)
    write(tmp_path, [sent(1)])
    path = segment_path(tmp_path, 1)
    at = path.stat().st_size
    with open(path, "ab") as f:
        f.write(batch(encode_frame(RECORD, 0, 2, b"\xc1 not a record")))
    # when recovered, then it is refused, with its position
    with pytest.raises(CorruptSegment, match=f"undecodable record at byte {at}"):
        seqs(tmp_path)


def _frame(flags: int, epoch: int, offset: int, record: tuple = (PURGED, "q")) -> bytes:
    return encode_frame(flags, epoch, offset, codec.encode(record))


def _segment(header: bytes, *frames: bytes) -> bytes:
    return header + (batch(*frames) if frames else b"")


CONTRADICTIONS = {
    "offsets going back": ([_segment(encode_header(BASE, 1), _frame(RECORD, 0, 2), _frame(RECORD, 0, 2))],
                           "already at offset 3"),
    "an epoch going back": ([_segment(encode_header(BASE, 1), _frame(RECORD, 3, 1), _frame(RECORD, 2, 2))],
                            "lower than epoch 3"),
    "a record inside the snapshot": ([_segment(encode_header(BASE, 5, 4), _frame(RECORD, 0, 4))],
                                     "already at offset 5"),
    "a snapshot outside a base": (
        [_segment(encode_header(BASE, 1)), _segment(encode_header(0, 1), _frame(SNAPSHOT, 0, 0))],
        "a base segment's frame",
    ),
    "a snapshot of another offset": ([_segment(encode_header(BASE, 8, 7), _frame(SNAPSHOT, 0, 6))], "is of offset 6"),
    "a base not starting after its snapshot": ([_segment(encode_header(BASE, 9, 7))], "snapshot is of offset 7"),
    "epochs past the snapshot": (
        [_segment(encode_header(BASE, 8, 7), encode_frame(EPOCHS, 0, 7, EpochHistory([(0, 1), (1, 8)]).encode()))],
        "epoch history beyond the snapshot",
    ),
}


@pytest.mark.parametrize("case", CONTRADICTIONS, ids=list(CONTRADICTIONS))
def test_frames_that_check_out_but_contradict_the_log_are_refused(tmp_path: Path, case: str) -> None:
    # given segments whose frames are intact and committed but were never written so by a writer
    segments, message = CONTRADICTIONS[case]
    for index, data in enumerate(segments, start=1):
        segment_path(tmp_path, index).write_bytes(data)
    # when recovered, then that is refused, saying what does not add up, and nothing is cut
    with pytest.raises(CorruptSegment, match=message):
        seqs(tmp_path)
    assert [segment_path(tmp_path, i).read_bytes() for i in range(1, len(segments) + 1)] == segments


def test_a_version_1_log_keeps_version_1s_rules(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # given version 1 logs (no commit frames): one damaged before an intact record, one with a torn tail
    damaged, torn = tmp_path / "damaged", tmp_path / "torn"
    write_v1_log(damaged, [[sent(1), sent(2), sent(3)]])
    write_v1_log(torn, [[sent(1), sent(2)]])
    frames = frames_of(segment_path(damaged, 1))
    flip(segment_path(damaged, 1), frames[1].start + 20)
    intact = segment_path(torn, 1).stat().st_size
    with open(segment_path(torn, 1), "ab") as f:
        f.write(frames[2].payload.tobytes()[:10])
    # when they are recovered, then the damage is refused and the torn tail cut
    with pytest.raises(DamagedLog, match=f"intact records follow at byte {frames[2].start}"):
        seqs(damaged)
    with caplog.at_level(logging.WARNING, logger="ferrymq.storage.log.recovery"):
        assert seqs(torn) == [1, 2]
    assert segment_path(torn, 1).stat().st_size == intact
    # and salvage cuts version 1 damage the version 1 way, keeping the frames as they are
    report = salvage(damaged)
    assert [(r.offset, r.end) for r in report.ranges] == [(frames[1].start, frames[2].start)]
    assert seqs(damaged) == [1, 3]


def test_a_version_1_last_segment_with_a_damaged_header_over_a_small_record_is_not_removed(tmp_path: Path) -> None:
    # given a version 1 last segment holding one small record, whose 16-byte header is damaged
    write_v1_log(tmp_path, [[sent(1)], [(PURGED, "q")]])
    flip(segment_path(tmp_path, 2), 14)
    assert segment_path(tmp_path, 2).stat().st_size < HEADER_SIZE
    # when recovered, then it is refused rather than taken for a header that never completed
    with pytest.raises(CorruptSegment, match="nothing was removed"):
        seqs(tmp_path)
    assert list_segments(tmp_path) == [1, 2]


# --- salvage ---------------------------------------------------------------------------------------------


def test_salvage_cuts_the_damaged_range_and_keeps_the_records_after_it(tmp_path: Path) -> None:
    # given a log whose second record of five is damaged
    write(tmp_path, [sent(i) for i in range(1, 6)])
    spans = record_spans(segment_path(tmp_path, 1))
    flip(segment_path(tmp_path, 1), spans[1][0] + 25)
    # when it is salvaged
    report = salvage(tmp_path)
    # then the report names the range cut and the records kept
    (segment,) = report.segments
    assert segment.segment == segment_path(tmp_path, 1).name
    assert [(r.offset, r.end) for r in segment.cut] == [spans[1]]
    assert segment.records == 4
    assert not report.dry_run
    # and recovery succeeds with every record but the damaged one, and the log goes on
    assert seqs(tmp_path) == [1, 3, 4, 5]
    write(tmp_path, [sent(6)])
    assert seqs(tmp_path) == [1, 3, 4, 5, 6]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_salvage_over_several_segments_cuts_every_range_and_leaves_intact_segments_alone(tmp_path: Path) -> None:
    # given damage in a sealed segment and in the last one, and intact segments between
    write(tmp_path, [sent(i, "z" * 300) for i in range(1, 21)], segment_bytes=1024)
    write(tmp_path, [sent(21), sent(22)])
    indexes = list_segments(tmp_path)
    assert len(indexes) >= 3
    first, middle, last = (segment_path(tmp_path, i) for i in (indexes[0], indexes[1], indexes[-1]))
    lost = {seqs_in(first)[0], seqs_in(last)[0]}
    middle_bytes = middle.read_bytes()
    flip(first, HEADER_SIZE + 30)
    flip(last, HEADER_SIZE + 30)
    damaged = [segment_path(tmp_path, i).read_bytes() for i in indexes]
    # when a dry run looks first
    preview = salvage(tmp_path, dry_run=True)
    # then it reports both ranges and changes nothing
    assert [s.segment for s in preview.segments if s.cut] == [first.name, last.name]
    assert [segment_path(tmp_path, i).read_bytes() for i in indexes] == damaged
    assert preview.lines()[0].startswith(f"{first.name}: would cut ")
    # and when salvage runs for real, it cuts just what the dry run reported
    report = salvage(tmp_path)
    assert report.as_dict()["segments"] == preview.as_dict()["segments"]
    assert middle.read_bytes() == middle_bytes
    got = seqs(tmp_path)
    assert got == [s for s in range(1, 23) if s not in lost]
    assert report.records == len(got)


def seqs_in(path: Path) -> list[int]:
    return [codec.decode(f.payload)[3] for f in scan_frames(path.read_bytes(), HEADER_SIZE) if f.flags == RECORD]


def test_salvage_cuts_a_record_whose_checksum_is_right_but_which_is_not_a_record(tmp_path: Path) -> None:
    # given an unreadable frame with a correct CRC between two records (recovery refuses it)
    write(tmp_path, [sent(1)])
    path = segment_path(tmp_path, 1)
    at = path.stat().st_size
    junk = encode_frame(RECORD, 0, 2, b"\xc1 not a record")
    with open(path, "ab") as f:
        f.write(batch(junk, encode_frame(RECORD, 0, 3, codec.encode(sent(2)))))
    with pytest.raises(CorruptSegment, match="undecodable"):
        seqs(tmp_path)
    # when salvaged, then exactly that frame is cut and both records remain
    report = salvage(tmp_path)
    assert [(r.offset, r.length) for r in report.ranges] == [(at, len(junk))]
    assert seqs(tmp_path) == [1, 2]


def test_salvage_of_an_intact_log_changes_nothing(tmp_path: Path) -> None:
    write(tmp_path, [sent(1), sent(2)])
    path = segment_path(tmp_path, 1)
    before = (path.read_bytes(), path.stat().st_ino)
    report = salvage(tmp_path)
    assert report.ranges == [] and report.records == 2
    assert (path.read_bytes(), path.stat().st_ino) == before
    assert report.lines()[-1].endswith("no damage in 1 segment(s), 2 records")


def test_salvage_refuses_while_a_worker_holds_the_directory(tmp_path: Path) -> None:
    # given a damaged log whose directory lock is held (as a running worker holds it)
    write(tmp_path, [sent(1), sent(2), sent(3)])
    flip(segment_path(tmp_path, 1), HEADER_SIZE + 20)
    damaged = segment_path(tmp_path, 1).read_bytes()
    with locked(tmp_path):
        # when salvage runs, for real or dry, then it refuses and changes nothing
        with pytest.raises(DirectoryInUse):
            salvage(tmp_path)
        with pytest.raises(DirectoryInUse):
            salvage(tmp_path, dry_run=True)
    assert segment_path(tmp_path, 1).read_bytes() == damaged


def test_salvage_refuses_a_directory_without_a_log_and_a_damaged_header(tmp_path: Path) -> None:
    # a directory holding no segments (a mistyped path) is refused without leaving a LOCK file in it
    with pytest.raises(SalvageRefused, match="no log segments"):
        salvage(tmp_path)
    assert not (tmp_path / "LOCK").exists()
    # a sealed segment whose header is damaged cannot be salvaged by cutting records, and the refusal
    # comes before any segment is rewritten, even one that precedes it
    write(tmp_path, [sent(i, "y" * 300) for i in range(1, 10)], segment_bytes=1024)
    flip(segment_path(tmp_path, 1), HEADER_SIZE + 30)
    flip(segment_path(tmp_path, 2), 2)
    before = [segment_path(tmp_path, i).read_bytes() for i in list_segments(tmp_path)]
    with pytest.raises(SalvageRefused, match=f"{segment_path(tmp_path, 2)}: .*header"):
        salvage(tmp_path)
    assert [segment_path(tmp_path, i).read_bytes() for i in list_segments(tmp_path)] == before


def test_salvage_leaves_a_last_segment_whose_header_never_completed_to_recovery(tmp_path: Path) -> None:
    write(tmp_path, [sent(1)])
    segment_path(tmp_path, 2).write_bytes(encode_header(0, 2)[:30])
    report = salvage(tmp_path)
    assert report.ranges == []
    assert "recovery removes it" in (report.segments[-1].note or "")
    assert seqs(tmp_path) == [1]
    assert list_segments(tmp_path) == [1]
    assert os.path.exists(segment_path(tmp_path, 1))


def test_compaction_names_the_segment_whose_record_it_cannot_read(tmp_path: Path) -> None:
    # given two sealed segments, the second holding a committed frame whose CRC matches but which is no record
    write(tmp_path, [sent(1), sent(2), sent(4)], segment_bytes=1)
    assert list_segments(tmp_path)[:3] == [1, 2, 3]
    second = segment_path(tmp_path, 2)
    at = second.stat().st_size
    with open(second, "ab") as f:
        f.write(batch(encode_frame(RECORD, 0, 3, b"\xc1 not a record")))
    # when compacted, then the error names the second segment and the position of that frame, and nothing changed
    with pytest.raises(CorruptSegment) as refused:
        compact_segments(tmp_path, [1, 2], fold)
    assert str(refused.value).startswith(f"{second}: undecodable record at byte {at}:"), (str(refused.value), at)
    assert list_segments(tmp_path)[:2] == [1, 2]
