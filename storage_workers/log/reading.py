"""Reading segments: their frames with offsets and epochs checked, sealed segments strictly, and a log from
an offset on (what replication streams).

A version 2 frame carries its offset; a version 1 frame does not, so readers count: a version 1 log's
records take offsets 1, 2, ... in order, and epoch 0.  Offsets only grow, within a segment and from one to
the next, and each version 2 segment starts (``first offset`` in its header) where the one before it ended:
a segment lost from the middle of the log shows as a gap there instead of passing unnoticed.

What replication streams (:class:`LogReader`) is read in windows from a batch boundary near the offset asked
for, found in a sparse per-segment index (:class:`SegmentIndex`: one entry per ``INDEX_STEP_BYTES`` of
batches, noted by the readers as they walk a segment and kept by the log writer for the process's lifetime),
so a FETCH from any offset reads about what it returns: a segment is walked from its start at most once.
"""

from __future__ import annotations

import bisect
import os
import threading
from array import array
from collections.abc import Iterator
from pathlib import Path

from ferrymq.storage.engine.records import Record
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.epochs import EpochHistory, EpochRegressed
from ferrymq.storage.log.format import (
    ENGINE_FLAGS,
    EPOCHS,
    HEADER_SIZE,
    RECORD,
    SNAPSHOT,
    VERSION_1,
    BatchScan,
    CorruptSegment,
    Frame,
    SegmentHeader,
    decode_header,
)
from ferrymq.storage.log.segments import SEALED, DamagedLog, DamagedRange, SegmentInfo, damaged_ranges, segment_path


class OffsetCompacted(LookupError):
    """The records asked for were compacted away: only a snapshot holds their state now."""


def read_header(path: Path, data: bytes | memoryview) -> SegmentHeader:
    try:
        return decode_header(data)
    except CorruptSegment as exc:
        raise CorruptSegment(f"{path}: {exc}") from None


def read_head(path: Path) -> bytes:
    """The bytes a segment's header may take (fewer if the file is shorter)."""
    with open(path, "rb") as f:
        return f.read(HEADER_SIZE)


def open_segment(path: Path) -> tuple[int, SegmentHeader]:
    """A descriptor of segment ``path`` open for reading (``pread``), and its header."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return fd, decode_header(os.pread(fd, HEADER_SIZE, 0))
    except BaseException:
        os.close(fd)
        raise


def first_offset(path: Path, header: SegmentHeader, expected: int | None) -> int:
    """The offset segment ``path`` starts at, given where the segment before it ended (None: it is the log's
    first); raises CorruptSegment when the two do not meet."""
    if header.version == VERSION_1:
        return 1 if expected is None else expected
    if header.is_base and header.first_offset != header.snapshot_offset + 1:
        raise CorruptSegment(
            f"{path}: base segment starts at offset {header.first_offset}, but its snapshot is of offset "
            f"{header.snapshot_offset}"
        )
    if expected is not None and header.first_offset != expected:
        raise CorruptSegment(
            f"{path}: segment starts at offset {header.first_offset}, but the log before it ends at offset "
            f"{expected}: records between them are missing (a lost segment?)"
        )
    return header.first_offset


class SegmentWalk:
    """The committed batches of one segment (:class:`~.format.BatchScan`), each frame's offset checked
    (version 2) or assigned (version 1), and its epoch noted in ``history``.

    ``next_offset`` is the offset after the last record walked; ``end`` where the committed bytes end.
    """

    def __init__(
        self,
        path: Path,
        data: bytes | memoryview,
        header: SegmentHeader,
        next_offset: int,
        history: EpochHistory,
        start: int | None = None,
        base: int = 0,
    ) -> None:
        """``start``: where in ``data`` the first batch begins (the header's end when None); a walk from a
        batch boundary inside a segment takes ``next_offset`` as the walk from the start had it there.
        ``base``: the file position of ``data``'s first byte (for the positions errors name)."""
        self.path = path
        self.base = base
        self.header = header
        self.next_offset = next_offset
        self.history = history
        self.scan = BatchScan(data, header.size if start is None else start, header.version)

    @property
    def end(self) -> int:
        return self.scan.end

    def batches(self) -> Iterator[list[Frame]]:
        for batch in self.scan:
            frames = [self._checked(frame) for frame in batch]
            commit = self.scan.last_commit
            if commit is not None and commit.offset >= self.next_offset:
                # Salvage, after cutting a sealed segment's last records, ends it with a commit carrying the
                # offset the next segment starts after, so that the two still meet.
                self.next_offset = commit.offset + 1
            yield frames

    def _checked(self, frame: Frame) -> Frame:
        if self.header.version == VERSION_1:
            frame = frame._replace(offset=self.next_offset)
        if frame.flags == RECORD:
            if frame.offset < self.next_offset:
                raise CorruptSegment(
                    f"{self.path}: the record at byte {self.base + frame.start} has offset {frame.offset}, but the "
                    f"log is already at offset {self.next_offset}"
                )
            self._observe(frame.epoch, frame.offset)
            self.next_offset = frame.offset + 1
        elif not self.header.is_base:
            raise CorruptSegment(
                f"{self.path}: a base segment's frame (flags {frame.flags:#x}) at byte {self.base + frame.start}"
            )
        elif frame.flags == SNAPSHOT:
            if frame.offset != self.header.snapshot_offset:
                raise CorruptSegment(
                    f"{self.path}: snapshot frame at byte {self.base + frame.start} is of offset {frame.offset}, the "
                    f"segment's snapshot of offset {self.header.snapshot_offset}"
                )
        elif frame.flags == EPOCHS:
            for epoch, first in EpochHistory.decode(frame.payload).entries:
                if first > self.header.snapshot_offset:
                    raise CorruptSegment(
                        f"{self.path}: epoch history beyond the snapshot at byte {self.base + frame.start}"
                    )
                self._observe(epoch, first)
        return frame

    def _observe(self, epoch: int, offset: int) -> None:
        try:
            self.history.observe(epoch, offset)
        except EpochRegressed as exc:
            raise CorruptSegment(f"{self.path}: {exc}") from None


WALK_WINDOW_BYTES = 8 * 1024 * 1024
"""What a walk of a whole segment (recovery, compaction) reads at a time."""


class ChunkedWalk:
    """A :class:`SegmentWalk` over a segment's bytes fed a chunk at a time (read from disk, or arriving over the
    network), from file position ``position``, a batch boundary where the walk from the start had reached
    ``next_offset``: each chunk's completed batches are walked, the bytes of a batch not yet complete are kept
    for the next chunk.  ``end`` is the file position where the batches walked so far end."""

    def __init__(
        self, path: Path, header: SegmentHeader, next_offset: int, history: EpochHistory, position: int
    ) -> None:
        self.path = path
        self.header = header
        self.next_offset = next_offset
        self.history = history
        self.end = position
        self.pending = b""
        """The bytes after ``end`` fed so far (a batch not yet complete, or damage)."""

    def feed(self, chunk: bytes) -> Iterator[tuple[int, list[Frame]]]:
        """Each batch ``chunk`` completes, with the file position its frames' ``start`` and ``end`` count from
        (use the frames before the next batch: their payloads point into the chunk)."""
        buf = self.pending + chunk if self.pending else chunk
        walk = SegmentWalk(self.path, buf, self.header, self.next_offset, self.history, start=0, base=self.end)
        for batch in walk.batches():
            yield self.end, batch
        self.next_offset = walk.next_offset
        self.end += walk.end
        self.pending = buf[walk.end :]


class WindowedWalk:
    """A :class:`SegmentWalk` of segment ``path`` read from disk a window at a time (a :class:`ChunkedWalk`), so
    that memory holds a window and the batch being completed, never the whole file (a base segment holds a
    partition's whole state).

    :meth:`batches` yields each committed batch with the file position its frames' ``start`` and ``end`` count
    from (the frames' payloads point into the window: use them before the next batch).  Once done, ``end`` is
    the file position where the committed bytes end and ``size`` the file's size: anything between is a torn
    tail or damage, for the caller to read and judge (:meth:`rest`).
    """

    def __init__(
        self,
        path: Path,
        header: SegmentHeader,
        next_offset: int,
        history: EpochHistory,
        window: int | None = None,
    ) -> None:
        self.path = path
        self.header = header
        self.next_offset = next_offset
        self.history = history
        self.window = window if window is not None else WALK_WINDOW_BYTES
        self.end = header.size
        self.size = header.size

    def resume(self, position: int, next_offset: int) -> None:
        """Walk from ``position``, a batch boundary where the walk from the start had reached ``next_offset``."""
        self.end, self.next_offset = position, next_offset

    def batches(self) -> Iterator[tuple[int, list[Frame]]]:
        walk = ChunkedWalk(self.path, self.header, self.next_offset, self.history, self.end)
        with open(self.path, "rb", buffering=0) as f:
            self.size = os.fstat(f.fileno()).st_size
            f.seek(self.end)
            while chunk := f.read(self.window):
                yield from walk.feed(chunk)
                self.next_offset, self.end = walk.next_offset, walk.end

    def rest(self) -> bytes:
        """The whole file, to judge what follows ``end`` (damage or a torn tail: rare, and small unless damage)."""
        return self.path.read_bytes()


def damage_in(path: Path, data: bytes | memoryview, start: int, version: int) -> list[DamagedRange]:
    """The damaged ranges from ``start``, where a batch did not check out.  Every frame may be intact while
    the batch is not (a commit that does not match it): the whole rest is then the damaged range."""
    return damaged_ranges(path.name, data, start, version) or [DamagedRange(path.name, start, len(data) - start)]


def sealed_frames(walk: WindowedWalk) -> Iterator[Frame]:
    """Every frame of a segment that was entirely synced, positions counted in the file: damage anywhere in it
    is an error."""
    for base, batch in walk.batches():
        for frame in batch:
            yield frame._replace(start=base + frame.start, end=base + frame.end)
    if walk.end != walk.size:
        raise DamagedLog(walk.path, damage_in(walk.path, walk.rest(), walk.end, walk.header.version), SEALED)


def decode(frame: Frame, path: Path, base: int = 0) -> Record:
    """The record in ``frame`` (of segment ``path``, whose positions count from file position ``base``)."""
    try:
        return codec.decode(frame.payload)
    except Exception as exc:
        # The CRC matched, so these are the bytes that were written: not damage but a record this code cannot read.
        raise CorruptSegment(f"{path}: undecodable record at byte {base + frame.start}: {exc}") from None


class SealedSegments:
    """The frames of sealed segments ``indexes`` (consecutive, from the log's base on) as ``(segment index,
    frame)``, read strictly.  Once iterated to the end, ``last_offset`` and ``last_epoch`` are those of the
    state they add up to, and ``history`` its epoch history."""

    def __init__(self, directory: Path, indexes: list[int]) -> None:
        self.directory = directory
        self.indexes = indexes
        self.last_offset = 0
        self.last_epoch = 0
        self.history = EpochHistory()
        self.finished = False

    def __iter__(self) -> Iterator[tuple[int, Frame]]:
        expected: int | None = None
        for index in self.indexes:
            path = segment_path(self.directory, index)
            header = read_header(path, read_head(path))
            if expected is None and header.is_base:
                self.last_epoch = header.snapshot_epoch
            walk = WindowedWalk(path, header, first_offset(path, header, expected), self.history)
            for frame in sealed_frames(walk):
                if frame.flags == RECORD:
                    self.last_epoch = frame.epoch
                yield index, frame
            expected = walk.next_offset
        self.last_offset = (expected or 1) - 1
        self.finished = True

    def engine_frames(self) -> Iterator[tuple[int, Frame, Path]]:
        """The frames holding engine records, as ``(segment index, frame, the segment's path)``: the path is for a
        decoding error's text only, so it is made once per segment, not per record."""
        path_of, path = -1, self.directory
        for index, frame in self:
            if frame.flags in ENGINE_FLAGS:
                if index != path_of:
                    path_of, path = index, segment_path(self.directory, index)
                yield index, frame, path


INDEX_STEP_BYTES = 64 * 1024
"""One index entry per this many bytes of a segment's batches: a read starts at most this far before its offset."""
READ_WINDOW_BYTES = 256 * 1024
"""What a reader reads at a time; a batch larger than this is read whole by doubling the window."""


class SegmentIndex:
    """Where batches start in one segment, sparsely: ``(position, next offset there)`` pairs in position order,
    the first at the header's end.  ``next offset`` is what a walk from the segment's start has as its
    ``next_offset`` at that position, so a walk may start there instead.  Shared by reader threads."""

    def __init__(self, start: int, first_offset: int) -> None:
        self._positions = array("q", [start])
        self._offsets = array("q", [first_offset])
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._positions)

    def seek(self, offset: int) -> tuple[int, int]:
        """The last noted batch start whose next offset is at or before ``offset``: ``(position, next offset)``."""
        with self._lock:
            at = max(bisect.bisect_right(self._offsets, offset) - 1, 0)
            return self._positions[at], self._offsets[at]

    def note(self, position: int, next_offset: int) -> None:
        """A batch starts at ``position``, where the walk's next offset is ``next_offset``; kept when it lies at
        least ``INDEX_STEP_BYTES`` past the last entry."""
        if position < self._positions[-1] + INDEX_STEP_BYTES:
            return
        with self._lock:
            if position >= self._positions[-1] + INDEX_STEP_BYTES and next_offset >= self._offsets[-1]:
                self._positions.append(position)
                self._offsets.append(next_offset)


class SegmentIndexes:
    """The :class:`SegmentIndex` of each segment file, by segment number and inode: compaction renames a new
    base over a segment number, which has another inode.  A truncation, which may cut a file in place,
    forgets them all (:meth:`clear`); an index object still held by a reader of the old bytes is then only
    dropped, never consulted again."""

    def __init__(self) -> None:
        self._indexes: dict[tuple[int, int], SegmentIndex] = {}
        self._lock = threading.Lock()

    def get(self, segment: int, inode: int, start: int, first_offset: int) -> SegmentIndex:
        key = (segment, inode)
        with self._lock:
            index = self._indexes.get(key)
            if index is None:
                index = self._indexes[key] = SegmentIndex(start, first_offset)
            return index

    def keep_only(self, segments: set[int]) -> None:
        """Forget the indexes of segments no longer in the log."""
        with self._lock:
            for key in [k for k in self._indexes if k[0] not in segments]:
                del self._indexes[key]

    def clear(self) -> None:
        with self._lock:
            self._indexes = {}


class LogReader:
    """The records of a log from an offset on, as ``(epoch, offset, payload bytes)``; an iterator to close
    (or use in a ``with`` block) when done with it early.

    It reads the segments as they were when it was made: their files are opened at once, so compaction
    deleting or replacing them meanwhile changes nothing it reads; a segment already compacted by then
    raises :class:`OffsetCompacted` if it held records asked for.  ``bytes_read`` counts what it read.
    """

    def __init__(
        self, directory: Path, segments: list[SegmentInfo], offset: int, indexes: SegmentIndexes | None = None
    ) -> None:
        start = segments[0].first_offset if segments else 1
        end = segments[-1].end_offset if segments else 1
        if offset < start:
            raise OffsetCompacted(f"offset {offset} was compacted away; the log starts at offset {start}")
        if offset > end:
            raise ValueError(f"offset {offset} is past the end of the log (offset {end})")
        self.offset = offset
        self.bytes_read = 0
        self._indexes = indexes if indexes is not None else SegmentIndexes()
        self._closed = False
        self._files: list[tuple[SegmentInfo, Path, int]] = []
        try:
            for info in segments:
                if info.end_offset <= offset:
                    continue
                path = segment_path(directory, info.index)
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    # Only compaction deletes segments, all of them before its new base.
                    raise OffsetCompacted(f"offset {offset} was compacted away while being read") from None
                self._files.append((info, path, fd))
        except BaseException:
            self.close()
            raise
        self._records = self._read()

    def __iter__(self) -> LogReader:
        return self

    def __next__(self) -> tuple[int, int, bytes]:
        if self._closed:
            raise StopIteration
        return next(self._records)

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        files, self._files = getattr(self, "_files", []), []
        for _, _, fd in files:
            os.close(fd)

    def _read(self) -> Iterator[tuple[int, int, bytes]]:
        try:
            for info, path, fd in list(self._files):
                head = self._pread(fd, min(info.size, HEADER_SIZE), 0)
                header = read_header(path, head)
                if header.is_base and header.first_offset > info.first_offset:
                    # Compacted after this reader's caller listed it: what it held is in the snapshot now.
                    if self.offset < header.first_offset:
                        raise OffsetCompacted(f"offset {self.offset} was compacted away while being read")
                    continue
                index = self._indexes.get(info.index, os.fstat(fd).st_ino, header.size, info.first_offset)
                position, next_offset = index.seek(self.offset)
                for frame in self._frames(info, path, fd, header, index, position, next_offset):
                    if frame.flags == RECORD and frame.offset >= self.offset:
                        yield frame.epoch, frame.offset, bytes(frame.payload)
        finally:
            self.close()

    def _frames(
        self,
        info: SegmentInfo,
        path: Path,
        fd: int,
        header: SegmentHeader,
        index: SegmentIndex,
        position: int,
        next_offset: int,
    ) -> Iterator[Frame]:
        """The frames of a segment that was entirely synced, from the batch at ``position`` on, read window by
        window; damage anywhere in what is read is an error."""
        history = EpochHistory()
        window = READ_WINDOW_BYTES
        while position < info.size:
            data = self._pread(fd, min(window, info.size - position), position)
            walk = SegmentWalk(path, data, header, next_offset, history, start=0)
            batches = walk.batches()
            while True:
                start, before = walk.end, walk.next_offset
                batch = next(batches, None)
                if batch is None:
                    break
                index.note(position + start, before)
                yield from batch
            if walk.end == 0:
                if position + len(data) >= info.size:
                    whole = self._pread(fd, info.size, 0)
                    ranges = damage_in(path, whole, position, header.version)
                    raise DamagedLog(path, ranges, SEALED)
                window *= 2
                continue
            position += walk.end
            next_offset = walk.next_offset
            window = READ_WINDOW_BYTES

    def _pread(self, fd: int, size: int, at: int) -> bytes:
        data = _pread(fd, size, at)
        self.bytes_read += len(data)
        return data


def _pread(fd: int, size: int, start: int = 0) -> bytes:
    chunks = []
    at = 0
    while at < size:
        chunk = os.pread(fd, size - at, start + at)
        if not chunk:
            break
        chunks.append(chunk)
        at += len(chunk)
    return b"".join(chunks)
