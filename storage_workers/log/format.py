"""Bytes of a log segment, encoded and decoded without touching a disk.

A segment starts with a 16-byte header and holds records back to back::

    header   0          8          10         12         16
             +----------+----------+----------+----------+
             | magic    | version  | flags    | crc32 of |
             | FERRYLOG | u16 = 1  | u16      | bytes 0-11|
             +----------+----------+----------+----------+

    record   0            4            8
             +------------+------------+----------------------------+
             | length u32 | crc32 u32  | payload (length bytes)     |
             +------------+------------+----------------------------+

Integers are big-endian; the CRC covers the payload.  ``length`` is never 0, so zeros left by a crash do not
pass for a record.  Flag ``BASE`` marks a segment written by compaction: it holds the whole state up to its
end, and segments numbered before it are obsolete.

A scan stops at the first record that does not check out.  Whether the bytes from there on are a torn tail
or damage depends on what follows: records are not aligned, so :func:`resync` tries every later offset for
the start of an intact record, and :func:`spans` covers a segment with intact records and the damaged
ranges between them.  Which it is, and what to do about it, is decided by the callers (recovery, salvage).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator
from zlib import crc32

MAGIC = b"FERRYLOG"
VERSION = 1
BASE = 0x0001

_HEADER_BODY = struct.Struct(">8sHH")
_U32 = struct.Struct(">I")
HEADER_SIZE = _HEADER_BODY.size + 4  # 16
_RECORD_HEAD = struct.Struct(">II")
RECORD_OVERHEAD = _RECORD_HEAD.size  # 8
MAX_RECORD = 256 * 1024 * 1024


# Where a record can start: a length of 1..MAX_RECORD, i.e. a first byte of at most 0x10 and not four zero bytes.
# Looked for by the regex engine, so that long runs of zeros or text are skipped without a Python step per byte.
_CANDIDATE = re.compile(rb"(?=[\x01-\x10]|\x00(?!\x00\x00\x00))")

Accept = Callable[[memoryview], bool]
"""Whether a payload whose CRC checks out is also a readable record."""


class CorruptSegment(Exception):
    """A segment's header or a record in the middle of the log is damaged."""


def encode_header(flags: int = 0) -> bytes:
    body = _HEADER_BODY.pack(MAGIC, VERSION, flags)
    return body + _U32.pack(crc32(body))


def decode_header(data: bytes) -> int:
    """The flags of a segment starting with ``data``; raises CorruptSegment when it is not a valid header."""
    if len(data) < HEADER_SIZE:
        raise CorruptSegment("segment header is incomplete")
    body = bytes(data[: _HEADER_BODY.size])
    if _U32.unpack_from(data, _HEADER_BODY.size)[0] != crc32(body):
        raise CorruptSegment("segment header checksum mismatch")
    magic, version, flags = _HEADER_BODY.unpack(body)
    if magic != MAGIC:
        raise CorruptSegment("not a FerryMQ log segment")
    if version != VERSION:
        raise CorruptSegment(f"unsupported log format version {version}")
    return flags


def encode_record(payload: bytes) -> bytes:
    if not payload:
        raise ValueError("a record payload is never empty")
    return _RECORD_HEAD.pack(len(payload), crc32(payload)) + payload


def scan_records(data: bytes | memoryview, offset: int = HEADER_SIZE) -> Iterator[tuple[int, memoryview]]:
    """``(end_offset, payload)`` for each intact record from ``offset``; stops at the end or a damaged one.

    The last ``end_offset`` yielded (or ``offset`` if none) is where the intact part of the data ends.
    """
    view = memoryview(data)
    size = len(view)
    unpack = _RECORD_HEAD.unpack_from
    while size - offset >= RECORD_OVERHEAD:
        length, crc = unpack(view, offset)
        start = offset + RECORD_OVERHEAD
        end = start + length
        if length == 0 or length > MAX_RECORD or end > size:
            return
        payload = view[start:end]
        if crc32(payload) != crc:
            return
        yield end, payload
        offset = end


def resync(data: bytes | memoryview, offset: int, accept: Accept) -> int | None:
    """The first offset at or after ``offset`` where an intact record starts (valid length, matching CRC, and a
    payload ``accept`` takes), or None when none does."""
    view = memoryview(data)
    size = len(view)
    unpack = _RECORD_HEAD.unpack_from
    for match in _CANDIDATE.finditer(view, offset, max(offset, size - RECORD_OVERHEAD + 1)):
        start = match.start()
        length, crc = unpack(view, start)
        end = start + RECORD_OVERHEAD + length
        if length == 0 or length > MAX_RECORD or end > size:
            continue
        payload = view[start + RECORD_OVERHEAD : end]
        # ``accept`` first: on garbage it fails within a few bytes, where the CRC reads the whole payload (up
        # to the end of the data, for a length that happens to fit).
        if accept(payload) and crc32(payload) == crc:
            return start
    return None


def spans(
    data: bytes | memoryview, accept: Accept, offset: int = HEADER_SIZE
) -> Iterator[tuple[int, int, memoryview | None]]:
    """Cover ``data`` from ``offset`` to its end with ``(start, end, payload)`` for each intact record and
    ``(start, end, None)`` for each damaged range: bytes up to the next intact record, or to the end.

    A record whose CRC checks out but whose payload ``accept`` refuses counts as damaged.
    """
    view = memoryview(data)
    size = len(view)
    while offset < size:
        for end, payload in scan_records(view, offset):
            if not accept(payload):
                break
            yield offset, end, payload
            offset = end
        if offset >= size:
            return
        found = resync(view, offset + 1, accept)
        stop = size if found is None else found
        yield offset, stop, None
        offset = stop
