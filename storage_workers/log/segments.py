"""Segment files on disk: naming, creating, reading and recovering them.

A log directory holds ``<index>.seg`` files (20-digit, increasing).  Only the highest-numbered one is written
to; the others are sealed.  Compaction writes ``<index>.seg.tmp`` and renames it over a sealed segment.

What a crash can leave: group commit acknowledges a batch only after its ``fdatasync``, and a segment is
created (header synced) only after the previous one is entirely durable.  So the only bytes a crash may
leave unfinished are the last batch of the last segment, at its end: a torn tail, cut at recovery.  A bad
record anywhere else, or one followed by an intact record, is damage to acknowledged data: recovery raises
:class:`DamagedLog` naming it and changes nothing (``ferrymq log salvage`` cuts it explicitly).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from storage_workers.engine.records import Record
from storage_workers.log import records as codec
from storage_workers.log.format import (
    BASE,
    HEADER_SIZE,
    CorruptSegment,
    decode_header,
    encode_header,
    scan_records,
    spans,
)

log = logging.getLogger(__name__)

SUFFIX = ".seg"
TMP_SUFFIX = ".seg.tmp"

_SEALED = "the segment is sealed (all of it was synced before the next segment began)"


@dataclass(slots=True)
class SegmentInfo:
    index: int
    size: int
    flags: int

    @property
    def is_base(self) -> bool:
        return bool(self.flags & BASE)


@dataclass(frozen=True, slots=True)
class DamagedRange:
    """Bytes of a segment that are not intact records: from a bad record to the next intact one (or the end)."""

    segment: str
    """The segment's file name."""
    offset: int
    length: int

    @property
    def end(self) -> int:
        return self.offset + self.length

    def describe(self) -> str:
        return f"bytes {self.offset}..{self.end} ({self.length} bytes)"


class DamagedLog(CorruptSegment):
    """Acknowledged records of the log are damaged; nothing was cut, and the log cannot be replayed as it is."""

    def __init__(self, path: Path, ranges: list[DamagedRange], why: str) -> None:
        self.path = path
        self.ranges = ranges
        first = ranges[0]
        more = f"; {len(ranges) - 1} more damaged range(s) after it" if len(ranges) > 1 else ""
        super().__init__(
            f"{path}: damaged record at offset {first.offset}: {first.describe()} do not check out and {why}{more}; "
            f"nothing was cut. `ferrymq log salvage --data-dir {path.parent}` cuts damaged ranges and reports "
            "what it cut; or restore this directory from a replica"
        )


def segment_path(directory: Path, index: int) -> Path:
    return directory / f"{index:020d}{SUFFIX}"


def list_segments(directory: Path) -> list[int]:
    out = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith(SUFFIX) and name[: -len(SUFFIX)].isdigit():
            out.append(int(name[: -len(SUFFIX)]))
    return sorted(out)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_segment(directory: Path, index: int, flags: int = 0) -> int:
    """Create segment ``index`` holding just its header, durably; returns a descriptor open for appending."""
    fd = os.open(segment_path(directory, index), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        write_all(fd, encode_header(flags))
        os.fdatasync(fd)
        fsync_dir(directory)
    except BaseException:
        os.close(fd)
        raise
    return fd


def replace_segment(directory: Path, index: int, chunks: Iterable[bytes | memoryview]) -> int:
    """Write segment ``index`` anew from ``chunks`` (its header first), atomically and durably: into a
    ``.tmp`` file, fsynced, renamed over the segment, directory fsynced.  Returns its size.

    A crash at any point leaves either the old segment or the new one, and at most a ``.tmp`` that recovery
    deletes; an exception (a cancelled compaction, a full disk) removes the ``.tmp`` at once.
    """
    tmp = directory / f"{index:020d}{TMP_SUFFIX}"
    size = 0
    try:
        with open(tmp, "wb", buffering=1024 * 1024) as f:
            for chunk in chunks:
                f.write(chunk)
                size += len(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, segment_path(directory, index))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(directory)
    return size


def open_for_append(directory: Path, index: int) -> int:
    return os.open(segment_path(directory, index), os.O_WRONLY | os.O_APPEND)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_records(path: Path) -> Iterator[Record]:
    """Every record of a sealed segment; damage anywhere is an error, not a tail to cut."""
    for _, _, record in read_located(path):
        yield record


def read_located(path: Path) -> Iterator[tuple[int, int, Record]]:
    """``(payload offset, payload length, record)`` for every record of a sealed segment, as read_records."""
    data = path.read_bytes()
    try:
        decode_header(data)
    except CorruptSegment as exc:
        raise CorruptSegment(f"{path}: {exc}") from None
    start = end = HEADER_SIZE
    for end, payload in scan_records(data):
        yield end - len(payload), len(payload), _decode(payload, path, start)
        start = end
    if end != len(data):
        raise DamagedLog(path, damaged_ranges(path.name, data, end), _SEALED)


def damaged_ranges(name: str, data: bytes | memoryview, offset: int) -> list[DamagedRange]:
    """The damaged ranges of segment ``name`` (its bytes ``data``) from ``offset``, where a record is bad."""
    return [
        DamagedRange(name, start, end - start)
        for start, end, payload in spans(data, codec.readable, offset)
        if payload is None
    ]


def _decode(payload: memoryview, path: Path, offset: int) -> Record:
    try:
        return codec.decode(payload)
    except Exception as exc:
        # The CRC matched, so these are the bytes that were written: not damage but a record this code cannot read.
        raise CorruptSegment(f"{path}: undecodable record at offset {offset}: {exc}") from None


def recover(directory: Path, apply: Callable[[Record], None]) -> list[SegmentInfo]:
    """Feed every record of the log in ``directory`` to ``apply``; returns the segments that remain.

    Cleans up after a crash: leftovers of an unfinished compaction go, segments made obsolete by a later
    base segment go, a last segment whose header never made it to disk goes, and a torn tail of the last
    segment (a bad record with nothing intact after it) is truncated.  Damage anywhere else raises
    :class:`CorruptSegment` (:class:`DamagedLog` for damaged records) and leaves the files as they are;
    records before the damage may have been fed to ``apply`` by then.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(directory):
        if entry.name.endswith(TMP_SUFFIX):
            os.unlink(entry.path)
    indexes = list_segments(directory)
    flags: dict[int, int] = {}
    for pos, index in enumerate(indexes):
        path = segment_path(directory, index)
        with open(path, "rb") as f:
            head = f.read(HEADER_SIZE)
        try:
            flags[index] = decode_header(head)
        except CorruptSegment as exc:
            if pos != len(indexes) - 1:
                raise CorruptSegment(f"{path}: {exc}") from None
            size = path.stat().st_size
            if size > HEADER_SIZE:
                # The header is synced before any record is appended: records behind a bad one are not a crash's.
                raise CorruptSegment(
                    f"{path}: {exc}, with {size - HEADER_SIZE} bytes of records after it; nothing was removed"
                ) from None
            log.warning("removing %s: header never completed (%s)", path.name, exc)
            os.unlink(path)
            fsync_dir(directory)
            indexes.pop()
    if not indexes:
        return []
    bases = [i for i in indexes if flags[i] & BASE]
    if not bases:
        raise CorruptSegment(f"no base segment in {directory}: the start of the log is missing")
    first = bases[-1]
    obsolete = [i for i in indexes if i < first]
    for index in obsolete:
        os.unlink(segment_path(directory, index))
    if obsolete:
        fsync_dir(directory)
    live = [i for i in indexes if i >= first]
    out: list[SegmentInfo] = []
    for pos, index in enumerate(live):
        path = segment_path(directory, index)
        data = path.read_bytes()
        start = end = HEADER_SIZE
        for end, payload in scan_records(data):
            apply(_decode(payload, path, start))
            start = end
        if end != len(data):
            ranges = damaged_ranges(path.name, data, end)
            if pos != len(live) - 1:
                raise DamagedLog(path, ranges, _SEALED)
            if ranges[0].end != len(data):
                raise DamagedLog(path, ranges, f"intact records follow at offset {ranges[0].end}")
            log.warning("%s: cutting a torn tail of %d bytes at offset %d", path.name, len(data) - end, end)
            fd = os.open(path, os.O_WRONLY)
            try:
                os.ftruncate(fd, end)
                os.fsync(fd)
            finally:
                os.close(fd)
        out.append(SegmentInfo(index, end, flags[index]))
    return out
