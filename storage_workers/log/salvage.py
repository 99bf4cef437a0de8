"""Salvage: cut a log's damaged ranges on purpose, keep every intact record, and say what was cut.

Recovery refuses a log whose damage is not a torn tail (:class:`~storage_workers.log.segments.DamagedLog`):
cutting acknowledged records is not its call.  When no replica can repair the log, an operator runs
``ferrymq log salvage --data-dir DIR`` on the stopped worker's directory.  Salvage

1. takes the directory's lock, so it never runs beside a worker (and no worker starts meanwhile);
2. scans every segment, resyncing past each damaged range to the next intact record (one whose length, CRC
   and payload all check out);
3. rewrites each damaged segment: ``<index>.seg.tmp`` gets the segment's header and its intact records,
   byte for byte, is fsynced and renamed over the segment, and the directory is fsynced.  A crash leaves the
   old segment or the new one, plus perhaps a ``.tmp`` that recovery deletes;
4. reports each range it cut (segment, offset, length) and the records it kept.

Whatever was in a cut range is lost; the report is what lets an operator tell which messages to look for
elsewhere.  A record that resync finds is taken at face value: it is intact, but nothing proves that it
was ever acknowledged (a torn batch may have reached the disk out of order).  With ``dry_run`` salvage only
reports (under a shared lock: it still refuses to read a log a worker is writing).  A segment whose header is
damaged is not salvageable this way: without the header, whether the log starts there is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storage_workers.log import records as codec
from storage_workers.log.format import HEADER_SIZE, CorruptSegment, decode_header, spans
from storage_workers.log.lock import locked
from storage_workers.log.segments import DamagedRange, list_segments, replace_segment, segment_path


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
            f"{s.segment}: {verb} {r.length} damaged bytes at offset {r.offset} (bytes {r.offset}..{r.end})"
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

    Raises :class:`~storage_workers.log.lock.DirectoryInUse` while a worker holds the directory, and
    :class:`SalvageRefused` when ``directory`` holds no log or a segment's header is damaged.
    """
    # Looked at before locking, so that a mistyped directory does not get a LOCK file.
    if not directory.is_dir() or not list_segments(directory):
        raise SalvageRefused(f"{directory} holds no log segments (expected a worker's log directory)")
    with locked(directory, shared=dry_run):
        indexes = list_segments(directory)
        # Every header is checked before any segment is rewritten, so that a refusal leaves the log as it was.
        incomplete = {index for index in indexes if not _header_ok(directory, index, index == indexes[-1])}
        found = [_salvage_segment(directory, index, index in incomplete, dry_run) for index in indexes]
    return SalvageReport(directory, dry_run, found)


def _header_ok(directory: Path, index: int, last: bool) -> bool:
    """Whether segment ``index`` has a valid header; False for a last segment whose header never completed."""
    path = segment_path(directory, index)
    with open(path, "rb") as f:
        head = f.read(HEADER_SIZE + 1)
    try:
        decode_header(head)
    except CorruptSegment as exc:
        if last and len(head) <= HEADER_SIZE:
            return False
        raise SalvageRefused(
            f"{path}: {exc}; salvage cannot tell whether the log starts here: restore it from a replica"
        ) from None
    return True


def _salvage_segment(directory: Path, index: int, incomplete: bool, dry_run: bool) -> SegmentSalvage:
    path = segment_path(directory, index)
    data = path.read_bytes()
    if incomplete:
        return SegmentSalvage(path.name, len(data), 0, note="header never completed; recovery removes it")
    view = memoryview(data)
    kept: list[memoryview] = []
    report = SegmentSalvage(path.name, len(data), 0)
    for start, end, payload in spans(view, codec.readable):
        if payload is None:
            report.cut.append(DamagedRange(path.name, start, end - start))
        else:
            kept.append(view[start:end])
    report.records = len(kept)
    if report.cut and not dry_run:
        replace_segment(directory, index, [view[:HEADER_SIZE], *kept])
    return report
