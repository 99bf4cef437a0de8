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
end, and segments numbered before it are obsolete.  A scan stops at the first record that does not check
out; everything after it is a torn tail to cut.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
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
