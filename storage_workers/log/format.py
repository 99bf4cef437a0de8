"""Bytes of a log segment, encoded and decoded without touching a disk.

A segment starts with a header and holds frames back to back.  Format version 2 (what the writer writes)::

    header   0          8          10         12             20                28               32          36
             +----------+----------+----------+--------------+-----------------+----------------+-----------+
             | magic    | version  | flags    | first offset | snapshot offset | snapshot epoch | crc32 of  |
             | FERRYLOG | u16 = 2  | u16      | u64          | u64             | u32            | bytes 0-31|
             +----------+----------+----------+--------------+-----------------+----------------+-----------+

    frame    0            4            8        9            13           21
             +------------+------------+--------+------------+------------+----------------------------+
             | length u32 | crc32 u32  | flags  | epoch u32  | offset u64 | payload (length bytes)     |
             +------------+------------+--------+------------+------------+----------------------------+
                                       |<------------- covered by the crc32: bytes 8 .. 21 + length ------>|

    commit   a frame with flags COMMIT whose payload is
             +------------------+-----------------+
             | batch length u32 | batch crc32 u32 |
             +------------------+-----------------+

Integers are big-endian.  ``length`` counts the payload only and is never 0, so zeros left by a crash do not
pass for a frame.  The frame's CRC covers everything after the CRC field: flags, epoch, offset and payload.

``offset`` numbers the engine records of a partition's log densely from 1 (salvage aside, which leaves the
gaps it cuts); ``epoch`` is the leader epoch a record was appended under.  ``first offset`` in the header is
the offset of the segment's first record (the log's offset after the previous segment's last).  Frame flags:

- ``RECORD`` (0x00): an engine record at ``offset``;
- ``SNAPSHOT`` (0x01): an engine record of a base segment's snapshot; the snapshot is the state as of the
  header's ``snapshot offset`` and ``snapshot epoch``, which the frame repeats; it takes no offset of its own;
- ``COMMIT`` (0x81, log-internal): ends every batch written in one go.  ``batch length`` and ``batch crc32``
  describe the bytes from the end of the previous commit (or of the header) to the start of this frame;
  ``epoch`` and ``offset`` are those of the last record written before it;
- ``EPOCHS`` (0x82, log-internal, base segments): the epoch history up to the snapshot
  (:mod:`.epochs`).

A commit frame removes the ambiguity of a power cut: the writer writes a batch and its commit in one write,
then syncs, and writes the next batch only after the sync returned.  So a batch whose commit is missing or
does not match was never synced (a torn tail, when it is the last), and one followed by a later batch's
valid commit was synced, and acknowledged: damage.

Flag ``BASE`` in the header marks a segment that starts the log: one written by compaction holds the whole
state as of its snapshot offset, and segments numbered before it are obsolete; a new log's first segment is
a base too, of an empty snapshot (offset 0), and records follow in it.

Format version 1 (still read, never written) has a 16-byte header ``magic | version u16 = 1 | flags u16 |
crc32`` and frames ``length u32 | crc32 u32 | payload`` (CRC of the payload), every one an engine record,
with no commit frames; its records take offsets in order and epoch 0.

A scan stops at the first frame that does not check out.  Whether the bytes from there on are a torn tail
or damage depends on what follows: frames are not aligned, so :func:`resync` tries every later offset for
the start of an intact frame, and :func:`spans` covers a segment with intact frames and the damaged ranges
between them.  Which it is, and what to do about it, is decided by the callers (recovery, salvage).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple
from zlib import crc32

from ferrymq.storage.log import epochs

MAGIC = b"FERRYLOG"
VERSION_1 = 1
VERSION = 2
BASE = 0x0001

RECORD = 0x00
SNAPSHOT = 0x01
INTERNAL = 0x80
COMMIT = 0x81
EPOCHS = 0x82
ENGINE_FLAGS = (RECORD, SNAPSHOT)
"""Frames whose payload is an engine record, fed to the engine at recovery."""

_HEADER_START = struct.Struct(">8sHH")
_HEADER_V2 = struct.Struct(">8sHHQQI")
_U32 = struct.Struct(">I")
HEADER_SIZE_V1 = _HEADER_START.size + 4  # 16
HEADER_SIZE = _HEADER_V2.size + 4  # 36
_HEAD_V1 = struct.Struct(">II")
_HEAD = struct.Struct(">IIBIQ")
_CRC_HEAD = struct.Struct(">BIQ")
"""The frame head's fields after the CRC, which the CRC covers."""
FRAME_OVERHEAD_V1 = _HEAD_V1.size  # 8
FRAME_OVERHEAD = _HEAD.size  # 21
_CRC_FROM = 8
"""Where the bytes a v2 frame's CRC covers begin."""
_COMMIT = struct.Struct(">II")
MAX_RECORD = 256 * 1024 * 1024
MAX_OFFSET = 2**64 - 1
MAX_EPOCH = 2**32 - 1

# Where a frame can start: a length of 1..MAX_RECORD, i.e. a first byte of at most 0x10 and not four zero bytes.
# Looked for by the regex engine, so that long runs of zeros or text are skipped without a Python step per byte.
_CANDIDATE = re.compile(rb"(?=[\x01-\x10]|\x00(?!\x00\x00\x00))")

Readable = Callable[[memoryview], bool]
"""Whether an engine record's payload whose CRC checks out is also a readable record."""


class CorruptSegment(Exception):
    """A segment's header or a frame in the middle of the log is damaged."""


@dataclass(frozen=True, slots=True)
class SegmentHeader:
    version: int
    flags: int
    first_offset: int = 0
    """The offset of the segment's first record (version 2; 0 for version 1, where offsets are counted)."""
    snapshot_offset: int = 0
    """For a base segment: the offset whose state the snapshot holds (0 when it holds none)."""
    snapshot_epoch: int = 0

    @property
    def size(self) -> int:
        return HEADER_SIZE_V1 if self.version == VERSION_1 else HEADER_SIZE

    @property
    def is_base(self) -> bool:
        return bool(self.flags & BASE)


class Frame(NamedTuple):
    start: int
    end: int
    flags: int
    epoch: int
    offset: int
    """For a version 1 frame: 0 as scanned; readers assign it (:mod:`.reading`)."""
    payload: memoryview


def encode_header(flags: int = 0, first_offset: int = 1, snapshot_offset: int = 0, snapshot_epoch: int = 0) -> bytes:
    body = _HEADER_V2.pack(MAGIC, VERSION, flags, first_offset, snapshot_offset, snapshot_epoch)
    return body + _U32.pack(crc32(body))


def encode_header_v1(flags: int = 0) -> bytes:
    """A version 1 header (what logs written before version 2 start with; tests build such logs)."""
    body = _HEADER_START.pack(MAGIC, VERSION_1, flags)
    return body + _U32.pack(crc32(body))


def claimed_header_size(data: bytes | memoryview) -> int:
    """The size of the header ``data`` starts with, going by its version field alone (which may be damaged)."""
    if len(data) >= _HEADER_START.size and _HEADER_START.unpack_from(data)[1] == VERSION_1:
        return HEADER_SIZE_V1
    return HEADER_SIZE


def decode_header(data: bytes | memoryview) -> SegmentHeader:
    """The header of a segment starting with ``data``; raises CorruptSegment when it is not a valid header."""
    size = claimed_header_size(data)
    if len(data) < size:
        raise CorruptSegment("segment header is incomplete")
    magic, version, _ = _HEADER_START.unpack_from(data)
    if magic == MAGIC and version not in (VERSION_1, VERSION):
        raise CorruptSegment(f"unsupported log format version {version} (or a damaged header)")
    body = bytes(data[: size - 4])
    if _U32.unpack_from(data, size - 4)[0] != crc32(body):
        raise CorruptSegment("segment header checksum mismatch")
    magic, version, flags = _HEADER_START.unpack_from(body)
    if magic != MAGIC:
        raise CorruptSegment("not a FerryMQ log segment")
    if version == VERSION_1:
        return SegmentHeader(VERSION_1, flags)
    if version != VERSION:
        raise CorruptSegment(f"unsupported log format version {version}")
    _, _, _, first, snapshot_offset, snapshot_epoch = _HEADER_V2.unpack(body)
    return SegmentHeader(VERSION, flags, first, snapshot_offset, snapshot_epoch)


def encode_frame(flags: int, epoch: int, offset: int, payload: bytes | memoryview) -> bytes:
    if not payload:
        raise ValueError("a frame payload is never empty")
    if not (0 <= epoch <= MAX_EPOCH and 0 <= offset <= MAX_OFFSET):
        raise ValueError(f"epoch {epoch} or offset {offset} out of range")
    crc = crc32(payload, crc32(_CRC_HEAD.pack(flags, epoch, offset)))
    return _HEAD.pack(len(payload), crc, flags, epoch, offset) + payload


def encode_frame_v1(payload: bytes) -> bytes:
    """A version 1 frame (tests build version 1 logs with it)."""
    if not payload:
        raise ValueError("a frame payload is never empty")
    return _HEAD_V1.pack(len(payload), crc32(payload)) + payload


def encode_commit(batch: bytes | memoryview, epoch: int, offset: int) -> bytes:
    """The commit frame that ends ``batch`` (the frames written since the previous commit)."""
    return encode_frame(COMMIT, epoch, offset, _COMMIT.pack(len(batch), crc32(batch)))


def commit_start(frame: Frame) -> int:
    """Where the batch a commit frame describes starts."""
    return frame.start - _COMMIT.unpack(frame.payload)[0]


def commit_matches(data: bytes | memoryview, frame: Frame) -> bool:
    """Whether the bytes before commit ``frame`` are the batch it describes."""
    length, crc = _COMMIT.unpack(frame.payload)
    start = frame.start - length
    return start >= 0 and crc32(memoryview(data)[start : frame.start]) == crc


def committed(
    frames: Iterable[bytes],
    epoch: int,
    offset: int,
    batch_bytes: int = 1024 * 1024,
    starts: list[int] | None = None,
) -> Iterator[bytes]:
    """``frames`` as batches of about ``batch_bytes``, each followed by its commit frame (for segments written
    whole, as compaction's); the commits carry ``epoch`` and ``offset``.  ``starts``, when given, is told where
    each frame starts, counted from the first byte yielded."""
    batch: list[bytes] = []
    size = 0
    done = 0
    for frame in frames:
        if starts is not None:
            starts.append(done + size)
        batch.append(frame)
        size += len(frame)
        if size >= batch_bytes:
            data = b"".join(batch)
            chunk = data + encode_commit(data, epoch, offset)
            done += len(chunk)
            yield chunk
            batch, size = [], 0
    if batch:
        data = b"".join(batch)
        yield data + encode_commit(data, epoch, offset)


def frame_at(view: memoryview, start: int, version: int) -> Frame | None:
    """The frame at ``start`` if its length fits, its flags are known and its CRC checks out."""
    size = len(view)
    if version == VERSION_1:
        if size - start < FRAME_OVERHEAD_V1:
            return None
        length, crc = _HEAD_V1.unpack_from(view, start)
        end = start + FRAME_OVERHEAD_V1 + length
        if length == 0 or length > MAX_RECORD or end > size:
            return None
        payload = view[start + FRAME_OVERHEAD_V1 : end]
        if crc32(payload) != crc:
            return None
        return Frame(start, end, RECORD, 0, 0, payload)
    if size - start < FRAME_OVERHEAD:
        return None
    length, crc, flags, epoch, offset = _HEAD.unpack_from(view, start)
    end = start + FRAME_OVERHEAD + length
    if length == 0 or length > MAX_RECORD or end > size or flags not in _KNOWN_FLAGS:
        return None
    if crc32(view[start + _CRC_FROM : end]) != crc:
        return None
    return Frame(start, end, flags, epoch, offset, view[start + FRAME_OVERHEAD : end])


_KNOWN_FLAGS = frozenset((RECORD, SNAPSHOT, COMMIT, EPOCHS))


def scan_frames(data: bytes | memoryview, offset: int, version: int = VERSION) -> Iterator[Frame]:
    """Each intact frame from ``offset``; stops at the end or at a damaged one.

    The last frame's ``end`` (or ``offset`` if none) is where the intact part of the data ends.
    """
    view = memoryview(data)
    size = len(view)
    while offset < size:
        frame = frame_at(view, offset, version)
        if frame is None:
            return
        yield frame
        offset = frame.end


def intact(frame: Frame, readable: Readable) -> bool:
    """Whether a frame whose CRC checks out also holds what its flags say: a readable record, a commit, an
    epoch history."""
    if frame.flags in ENGINE_FLAGS:
        return readable(frame.payload)
    if frame.flags == COMMIT:
        return len(frame.payload) == _COMMIT.size
    return epochs.readable(frame.payload)


def resync(data: bytes | memoryview, offset: int, readable: Readable, version: int = VERSION) -> int | None:
    """The first offset at or after ``offset`` where an intact frame starts (valid length and flags, matching
    CRC, and a payload that is what the flags say), or None when none does."""
    view = memoryview(data)
    size = len(view)
    overhead = FRAME_OVERHEAD_V1 if version == VERSION_1 else FRAME_OVERHEAD
    for match in _CANDIDATE.finditer(view, offset, max(offset, size - overhead + 1)):
        start = match.start()
        frame = _candidate(view, start, version, readable)
        if frame is not None:
            return start
    return None


def _candidate(view: memoryview, start: int, version: int, readable: Readable) -> Frame | None:
    # The payload check first: on garbage it fails within a few bytes, where the CRC reads the whole payload
    # (up to the end of the data, for a length that happens to fit).
    size = len(view)
    if version == VERSION_1:
        length = _U32.unpack_from(view, start)[0]
        end = start + FRAME_OVERHEAD_V1 + length
        if length == 0 or length > MAX_RECORD or end > size or not readable(view[start + FRAME_OVERHEAD_V1 : end]):
            return None
        return frame_at(view, start, version)
    length, _, flags, epoch, offset = _HEAD.unpack_from(view, start)
    end = start + FRAME_OVERHEAD + length
    if length == 0 or length > MAX_RECORD or end > size or flags not in _KNOWN_FLAGS:
        return None
    if not intact(Frame(start, end, flags, epoch, offset, view[start + FRAME_OVERHEAD : end]), readable):
        return None
    return frame_at(view, start, version)


def spans(
    data: bytes | memoryview, readable: Readable, offset: int, version: int = VERSION
) -> Iterator[tuple[int, int, Frame | None]]:
    """Cover ``data`` from ``offset`` to its end with ``(start, end, frame)`` for each intact frame and
    ``(start, end, None)`` for each damaged range: bytes up to the next intact frame, or to the end.

    A frame whose CRC checks out but which does not hold what its flags say counts as damaged.
    """
    view = memoryview(data)
    size = len(view)
    while offset < size:
        for frame in scan_frames(view, offset, version):
            if not intact(frame, readable):
                break
            yield offset, frame.end, frame
            offset = frame.end
        if offset >= size:
            return
        found = resync(view, offset + 1, readable, version)
        stop = size if found is None else found
        yield offset, stop, None
        offset = stop


class BatchScan:
    """The committed batches of a segment's bytes from ``start``, in order, as lists of frames (commit frames
    left out); a version 1 segment has no commits, so each of its frames is a batch of its own.

    Iteration stops at the first batch that does not check out: a damaged frame, a commit that does not
    match its batch, or the end of the data before a commit.  ``end`` is then where the committed part ends,
    and ``last_commit`` the last commit frame passed.
    """

    def __init__(self, data: bytes | memoryview, start: int, version: int) -> None:
        self._view = memoryview(data)
        self.version = version
        self.end = start
        self.last_commit: Frame | None = None

    def __iter__(self) -> Iterator[list[Frame]]:
        if self.version == VERSION_1:
            for frame in scan_frames(self._view, self.end, VERSION_1):
                self.end = frame.end
                yield [frame]
            return
        batch: list[Frame] = []
        for frame in scan_frames(self._view, self.end, VERSION):
            if frame.flags != COMMIT:
                batch.append(frame)
                continue
            if commit_start(frame) != self.end or not commit_matches(self._view, frame):
                return
            self.end = frame.end
            self.last_commit = frame
            yield batch
            batch = []
