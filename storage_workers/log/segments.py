"""Segment files on disk: naming, creating and replacing them, and what a segment's damage is called.

A log directory holds ``<index>.seg`` files (20-digit, increasing).  Only the highest-numbered one is written
to; the others are sealed.  Compaction writes ``<index>.seg.tmp`` and renames it over a sealed segment.
Reading them is :mod:`.reading`'s business, recovering them :mod:`.recovery`'s.
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ferrymq.storage.log import records as codec
from ferrymq.storage.log.format import (
    BASE,
    VERSION,
    CorruptSegment,
    encode_header,
    spans,
)

SUFFIX = ".seg"
TMP_SUFFIX = ".seg.tmp"

SEALED = "the segment is sealed (all of it was synced before the next segment began)"


@dataclass(slots=True)
class SegmentInfo:
    index: int
    size: int
    flags: int
    version: int = VERSION
    first_offset: int = 1
    """The offset of the segment's first record (for a base segment: one past its snapshot)."""
    end_offset: int = 1
    """The offset after the segment's last record."""

    @property
    def is_base(self) -> bool:
        return bool(self.flags & BASE)


@dataclass(frozen=True, slots=True)
class DamagedRange:
    """Bytes of a segment that are not intact frames: from a bad frame to the next intact one (or the end)."""

    segment: str
    """The segment's file name."""
    offset: int
    """A position in the file, in bytes (not a record offset)."""
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
            f"{path}: damaged frame at byte {first.offset}: {first.describe()} do not check out and {why}{more}; "
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


def create_segment(directory: Path, index: int, first_offset: int, flags: int = 0) -> int:
    """Create segment ``index``, whose first record will have ``first_offset``, holding just its header,
    durably; returns a descriptor open for appending."""
    fd = os.open(segment_path(directory, index), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    try:
        write_all(fd, encode_header(flags, first_offset, snapshot_offset=first_offset - 1 if flags & BASE else 0))
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
    deletes; an exception (a cancelled compaction, a full disk) removes the ``.tmp`` at once.  The partition's
    checkpoint, a state the old segment is part of, goes just before it.
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
        discard_checkpoint(directory)
        os.replace(tmp, segment_path(directory, index))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(directory)
    return size


CHECKPOINT_NAME = "state.ckpt"
"""The partition's state as of an offset, written when its worker stops and with each compaction
(:mod:`.checkpoint`)."""


def discard_checkpoint(directory: Path) -> None:
    """Delete the checkpoint before segments are rewritten (durably: a crash must not bring it back).  The base
    goes first: deltas left by a crash after it follow no base, and are never read."""
    try:
        os.unlink(directory / CHECKPOINT_NAME)
    except FileNotFoundError:
        pass
    else:
        fsync_dir(directory)
    discard_deltas(directory)


def discard_deltas(directory: Path, after: int = 0) -> None:
    """Delete the checkpoint's delta files (``state.ckpt.<n>``, :mod:`.checkpoint_chain`) numbered above
    ``after``."""
    removed = False
    for path in directory.glob(f"{CHECKPOINT_NAME}.[0-9]*"):
        number = path.name[len(CHECKPOINT_NAME) + 1:]
        if number.isdigit() and int(number) > after:
            path.unlink(missing_ok=True)
            removed = True
    if removed:
        fsync_dir(directory)


def crc_of(
    path: Path,
    size: int,
    window: int = 8 * 1024 * 1024,
    *,
    cpu_share: float = 1.0,
    cpu_clock: Callable[[], float] = time.thread_time,
    sleep: Callable[[float], None] = time.sleep,
) -> int | None:
    """The CRC-32 of the first ``size`` bytes of ``path``, read a window at a time (None: the file is shorter).

    With ``cpu_share`` under 1, it sleeps after each window for as long as keeps its CPU to that share of a core
    (the thread's CPU time, ``cpu_clock``): a check that can wait leaves the rest to whatever cannot."""
    crc = 0
    left = size
    rest = 1 / cpu_share - 1 if 0 < cpu_share < 1 else 0.0
    # One buffer, read into again and again: no window allocated and freed per read.
    buffer = memoryview(bytearray(min(window, size)))
    with open(path, "rb", buffering=0) as f:
        while left > 0:
            spent = cpu_clock()
            read = f.readinto(buffer[:min(window, left)])
            if not read:
                return None
            crc = zlib.crc32(buffer[:read], crc)
            left -= read
            if rest and left > 0:
                sleep((cpu_clock() - spent) * rest)
    return crc


def truncate_file(path: Path, size: int) -> None:
    """Cut the file at ``path`` to ``size`` bytes, durably."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def open_for_append(directory: Path, index: int) -> int:
    return os.open(segment_path(directory, index), os.O_WRONLY | os.O_APPEND)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def damaged_ranges(name: str, data: bytes | memoryview, offset: int, version: int) -> list[DamagedRange]:
    """The damaged ranges of segment ``name`` (its bytes ``data``) from ``offset``, where a frame is bad."""
    return [
        DamagedRange(name, start, end - start)
        for start, end, frame in spans(data, codec.readable, offset, version)
        if frame is None
    ]
