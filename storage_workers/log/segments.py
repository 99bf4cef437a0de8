"""Segment files on disk: naming, creating, reading and recovering them.

A log directory holds ``<index>.seg`` files (20-digit, increasing).  Only the highest-numbered one is written
to; the others are sealed.  Compaction writes ``<index>.seg.tmp`` and renames it over a sealed segment.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from storage_workers.engine.records import Record
from storage_workers.log import records as codec
from storage_workers.log.format import BASE, HEADER_SIZE, CorruptSegment, decode_header, encode_header, scan_records

log = logging.getLogger(__name__)

SUFFIX = ".seg"
TMP_SUFFIX = ".seg.tmp"


@dataclass(slots=True)
class SegmentInfo:
    index: int
    size: int
    flags: int

    @property
    def is_base(self) -> bool:
        return bool(self.flags & BASE)


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


def open_for_append(directory: Path, index: int) -> int:
    return os.open(segment_path(directory, index), os.O_WRONLY | os.O_APPEND)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_records(path: Path) -> Iterator[Record]:
    """Every record of a sealed segment; damage anywhere is an error, not a tail to cut."""
    data = path.read_bytes()
    decode_header(data)
    end = HEADER_SIZE
    for end, payload in scan_records(data):  # noqa: B007
        yield _decode(payload, path)
    if end != len(data):
        raise CorruptSegment(f"{path.name}: damaged record at offset {end}")


def _decode(payload: memoryview, path: Path) -> Record:
    try:
        return codec.decode(payload)
    except Exception as exc:
        raise CorruptSegment(f"{path.name}: undecodable record: {exc}") from None


def recover(directory: Path, apply: Callable[[Record], None]) -> list[SegmentInfo]:
    """Feed every record of the log in ``directory`` to ``apply``; returns the segments that remain.

    Cleans up after a crash: leftovers of an unfinished compaction go, segments made obsolete by a later
    base segment go, a last segment whose header never made it to disk goes, and a torn tail of the last
    segment is truncated.  Damage anywhere else raises :class:`CorruptSegment`.
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
                raise CorruptSegment(f"{path.name}: {exc}") from None
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
        end = HEADER_SIZE
        for end, payload in scan_records(data):  # noqa: B007
            apply(_decode(payload, path))
        if end != len(data):
            if pos != len(live) - 1:
                raise CorruptSegment(f"{path.name}: damaged record at offset {end} in a sealed segment")
            log.warning("%s: cutting a torn tail of %d bytes at offset %d", path.name, len(data) - end, end)
            fd = os.open(path, os.O_WRONLY)
            try:
                os.ftruncate(fd, end)
                os.fsync(fd)
            finally:
                os.close(fd)
        out.append(SegmentInfo(index, end, flags[index]))
    return out
