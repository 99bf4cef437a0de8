"""Salvage: cut a log's damaged ranges on purpose, keep every intact record, and say what was cut.

Recovery refuses a log whose damage is not a torn tail (:class:`~ferrymq.storage.log.segments.DamagedLog`):
cutting acknowledged records is not its call.  When no replica can repair the log, an operator runs
``ferrymq log salvage --data-dir DIR`` on the stopped worker's directory.  Salvage

1. takes the directory's lock, so it never runs beside a worker (and no worker starts meanwhile);
2. scans every segment, resyncing past each damaged range to the next intact frame (one whose length, CRC
   and payload all check out);
3. rewrites each damaged segment: ``<index>.seg.tmp`` gets the segment's header and its intact frames,
   byte for byte, is fsynced and renamed over the segment, and the directory is fsynced.  A crash leaves the
   old segment or the new one, plus perhaps a ``.tmp`` that recovery deletes;
4. reports each range it cut (segment, byte position, length) and the records it kept.

Version 2 segments end every batch with a commit frame that covers it, which a cut breaks: salvage drops
the old commit frames and ends each run of kept frames (a batch, or what a damaged range left of one) with
a new commit.  Records keep their offsets, so the log has a gap where records were cut; a sealed segment
whose last records were cut gets a last commit carrying the offset before the next segment's first, so
that the two still meet.  The last segment's last batch, when no commit proves it was synced, is a torn
tail: cut, as recovery would cut it.

Whatever was in a cut range is lost; the report is what lets an operator tell which messages to look for
elsewhere.  A frame that resync finds is taken at face value: it is intact, and a later batch's write
proves its batch was synced, but a version 1 log has no such proof (a torn batch may have reached the disk
out of order).  With ``dry_run`` salvage only
reports (under a shared lock: it still refuses to read a log a worker is writing).  A segment whose header is
damaged is not salvageable this way: without the header, whether the log starts there is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ferrymq.storage.log import records as codec
from ferrymq.storage.log.format import (
    COMMIT,
    ENGINE_FLAGS,
    HEADER_SIZE,
    RECORD,
    VERSION_1,
    CorruptSegment,
    Frame,
    SegmentHeader,
    claimed_header_size,
    commit_matches,
    commit_start,
    decode_header,
    encode_commit,
    spans,
)
from ferrymq.storage.log.lock import locked
from ferrymq.storage.log.segments import DamagedRange, list_segments, replace_segment, segment_path


class SalvageRefused(Exception):
    """Salvage cannot work on this directory (not a log, or damage that cutting records does not fix)."""


@dataclass(slots=True)
class SegmentSalvage:
    """What salvage found in one segment, and cut from it unless it was a dry run."""

    segment: str
    size: int
    """The segment's size before salvage."""
    records: int
    """Intact records, all kept."""
    cut: list[DamagedRange] = field(default_factory=list)
    note: str | None = None

    @property
    def cut_bytes(self) -> int:
        return sum(r.length for r in self.cut)

    def as_dict(self) -> dict[str, Any]:
        return {
            "segment": self.segment,
            "size": self.size,
            "records_kept": self.records,
            "cut": [{"offset": r.offset, "length": r.length} for r in self.cut],
            "note": self.note,
        }


@dataclass(slots=True)
class SalvageReport:
    directory: Path
    dry_run: bool
    segments: list[SegmentSalvage]

    @property
    def ranges(self) -> list[DamagedRange]:
        return [r for s in self.segments for r in s.cut]

    @property
    def records(self) -> int:
        return sum(s.records for s in self.segments)

    @property
    def cut_bytes(self) -> int:
        return sum(s.cut_bytes for s in self.segments)

    def as_dict(self) -> dict[str, Any]:
        return {
            "directory": str(self.directory),
            "dry_run": self.dry_run,
            "damaged_ranges": len(self.ranges),
            "cut_bytes": self.cut_bytes,
            "records_kept": self.records,
            "segments": [s.as_dict() for s in self.segments],
        }

    def lines(self) -> list[str]:
        """The report for a person: one line per damaged range and note, then a summary."""
        verb = "would cut" if self.dry_run else "cut"
        out = [
            f"{s.segment}: {verb} {r.length} damaged bytes at byte {r.offset} (bytes {r.offset}..{r.end})"
            for s in self.segments
            for r in s.cut
        ]
        out += [f"{s.segment}: {s.note}" for s in self.segments if s.note]
        damaged = [s for s in self.segments if s.cut]
        if damaged:
            out.append(
                f"{self.directory}: {verb} {len(self.ranges)} damaged range(s), {self.cut_bytes} bytes, in "
                f"{len(damaged)} of {len(self.segments)} segment(s); {self.records} intact records kept"
            )
        else:
            out.append(f"{self.directory}: no damage in {len(self.segments)} segment(s), {self.records} records")
        return out


def salvage(directory: Path, *, dry_run: bool = False) -> SalvageReport:
    """Cut every damaged range of the log in ``directory`` (only report them with ``dry_run``).

    Raises :class:`~ferrymq.storage.log.lock.DirectoryInUse` while a worker holds the directory, and
    :class:`SalvageRefused` when ``directory`` holds no log or a segment's header is damaged.
    """
    # Looked at before locking, so that a mistyped directory does not get a LOCK file.
    if not directory.is_dir() or not list_segments(directory):
        raise SalvageRefused(f"{directory} holds no log segments (expected a worker's log directory)")
    with locked(directory, shared=dry_run):
        indexes = list_segments(directory)
        # Every header is checked before any segment is rewritten, so that a refusal leaves the log as it was.
        headers = {index: _header(directory, index, index == indexes[-1]) for index in indexes}
        found = []
        for pos, index in enumerate(indexes):
            following = headers[indexes[pos + 1]] if pos + 1 < len(indexes) else None
            found.append(_salvage_segment(directory, index, headers[index], following, dry_run))
    return SalvageReport(directory, dry_run, found)


def _header(directory: Path, index: int, last: bool) -> SegmentHeader | None:
    """Segment ``index``'s header; None for a last segment whose header never completed."""
    path = segment_path(directory, index)
    with open(path, "rb") as f:
        head = f.read(HEADER_SIZE + 1)
    try:
        return decode_header(head)
    except CorruptSegment as exc:
        if last and len(head) <= claimed_header_size(head):
            return None
        raise SalvageRefused(
            f"{path}: {exc}; salvage cannot tell whether the log starts here: restore it from a replica"
        ) from None


def _salvage_segment(
    directory: Path, index: int, header: SegmentHeader | None, following: SegmentHeader | None, dry_run: bool
) -> SegmentSalvage:
    path = segment_path(directory, index)
    data = path.read_bytes()
    if header is None:
        return SegmentSalvage(path.name, len(data), 0, note="header never completed; recovery removes it")
    view = memoryview(data)
    report = SegmentSalvage(path.name, len(data), 0)
    if header.version == VERSION_1:
        kept: list[memoryview] = []
        for start, end, frame in spans(view, codec.readable, header.size, VERSION_1):
            if frame is None:
                report.cut.append(DamagedRange(path.name, start, end - start))
            else:
                kept.append(view[start:end])
        report.records = len(kept)
        if report.cut and not dry_run:
            replace_segment(directory, index, [view[: header.size], *kept])
        return report
    limit = len(data) if following is not None else _torn_tail_start(view, header.size)
    runs: list[list[Frame]] = [[]]
    for start, end, frame in spans(view[:limit], codec.readable, header.size):
        if frame is None:
            report.cut.append(DamagedRange(path.name, start, end - start))
            runs.append([])
        elif frame.flags == COMMIT:
            runs.append([])
        else:
            runs[-1].append(frame)
    if limit < len(data):
        report.cut.append(DamagedRange(path.name, limit, len(data) - limit))
        report.note = f"bytes {limit}..{len(data)} are the last batch, never committed: cut, as recovery would"
    report.records = sum(1 for run in runs for frame in run if frame.flags in ENGINE_FLAGS)
    if report.cut and not dry_run:
        replace_segment(directory, index, [view[: header.size], *_recommitted(view, header, runs, following)])
    return report


def _recommitted(
    view: memoryview, header: SegmentHeader, runs: list[list[Frame]], following: SegmentHeader | None
) -> list[bytes]:
    """Each run of kept frames with a commit of its own, and a last commit that makes the segment end where
    the next one starts."""
    out = []
    end, epoch = header.first_offset, header.snapshot_epoch
    for run in runs:
        if not run:
            continue
        batch = b"".join(view[f.start : f.end] for f in run)
        out.append(batch + encode_commit(batch, run[-1].epoch, run[-1].offset))
        for frame in run:
            if frame.flags == RECORD:
                end, epoch = frame.offset + 1, frame.epoch
    if following is not None and following.version != VERSION_1 and end < following.first_offset:
        out.append(encode_commit(b"", epoch, following.first_offset - 1))
    return out


def _torn_tail_start(view: memoryview, start: int) -> int:
    """Where the last segment's last batch starts when nothing proves it was synced (recovery's rule, see
    :mod:`.recovery`), else the end of the data."""
    last: Frame | None = None
    after_last = False
    for _, _, frame in spans(view, codec.readable, start):
        if frame is None:
            continue
        if frame.flags == COMMIT:
            last, after_last = frame, False
        else:
            after_last = True
    if last is None:
        return start
    if commit_matches(view, last) or after_last:
        return last.end
    return max(start, commit_start(last))
