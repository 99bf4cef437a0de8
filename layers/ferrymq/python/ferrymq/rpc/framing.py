"""Length-prefixed frames of the worker RPC, encoded and decoded without touching a socket.

Every request and every response is one frame; many may be in flight on one connection, matched by
``request_id`` (responses can come back in any order: a 20 s long poll does not hold up the others)::

    offset  0              4              8     9
            +--------------+--------------+-----+------------------------------+
            | length (u32) | request_id   | op/ | payload (msgpack)            |
            |              | (u32)        | st  |                              |
            +--------------+--------------+-----+------------------------------+
            |<-- length counts everything after this field: 5 + len(payload) ->|

All integers are big-endian.  In a request the byte after ``request_id`` is the operation (:class:`Op`);
in a response it is the status: ``0`` ok (payload = the result), ``1`` error (payload =
``{"code": str, "message": str}``, ``code`` being a :mod:`ferrymq.errors` class ``code``).

A request made on behalf of a front-end request carries that request's id (:data:`ferrymq.logs.REQUEST_ID`), so
the worker's log lines about it name the id the client was given.  Its operation byte then has :data:`TRACED`
set, and the payload starts with the id::

    | op | TRACED | n (u8) | n bytes: the request id (ASCII) | msgpack arguments |

A frame without the bit is read as before, so a worker reads frames from older front ends and from its peers
(which send none); a front end sending traced frames needs workers that know the bit (upgrade workers first).
"""

from __future__ import annotations

import struct
from enum import IntEnum

HEADER = struct.Struct(">IIB")
HEADER_SIZE = HEADER.size  # 9
_LENGTH = struct.Struct(">I")
_ID_OP = struct.Struct(">IB")
MAX_FRAME = 64 * 1024 * 1024
"""Largest ``length`` accepted; a bigger one means a corrupt or hostile stream."""

STATUS_OK = 0
STATUS_ERROR = 1

TRACED = 0x80
"""Set in a request's operation byte when its payload starts with the front end's request id."""
MAX_TRACE = 255
_TRACED_HEADER = struct.Struct(">IIBB")


class Op(IntEnum):
    PING = 1
    SEND = 2
    RECEIVE = 3
    DELETE = 4
    CHANGE_VISIBILITY = 5
    PURGE = 6
    DROP_QUEUE = 7
    STATS = 8
    START_MOVE_TASK = 9
    LIST_MOVE_TASKS = 10
    CANCEL_MOVE_TASK = 11
    FETCH = 12
    """A follower's pull of a partition's replication stream (not a front-end operation)."""
    OFFSET_FOR_EPOCH = 13
    """A rejoining follower's question: where does an epoch end in the leader's log (not a front-end operation)."""
    SNAPSHOT = 14
    """A far-behind follower's copy of the leader's state, in chunks (not a front-end operation)."""
    PEEK = 15
    """Visible messages without receiving them: a pure read that changes nothing and writes no record."""
    COPY_BASE = 16
    """A far-behind follower's copy of the leader's first segment, by byte ranges (not a front-end operation)."""


class FrameError(Exception):
    """The byte stream does not hold well-formed frames; the connection must be closed."""


def encode_frame(request_id: int, op_or_status: int, payload: bytes) -> bytes:
    return HEADER.pack(len(payload) + 5, request_id, op_or_status) + payload


def encode_traced_frame(request_id: int, op: int, trace: bytes, payload: bytes) -> bytes:
    """A request frame carrying ``trace`` (a request id of at most :data:`MAX_TRACE` ASCII bytes)."""
    return b"".join(
        (_TRACED_HEADER.pack(len(payload) + len(trace) + 6, request_id, op | TRACED, len(trace)), trace, payload)
    )


def split_trace(payload: bytes) -> tuple[str, memoryview]:
    """The request id and the arguments of a traced request's payload (the arguments are not copied)."""
    if not payload:
        raise FrameError("a traced request without its request id")
    end = 1 + payload[0]
    if end > len(payload):
        raise FrameError("a traced request's id runs past its payload")
    return payload[1:end].decode("ascii", "replace"), memoryview(payload)[end:]


class FrameDecoder:
    """Turns a byte stream, fed in chunks of any size, into ``(request_id, op_or_status, payload)`` frames."""

    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self._max = max_frame

    @property
    def buffered(self) -> int:
        """Bytes held back because they do not yet make a whole frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        buf = self._buf
        buf += data
        frames: list[tuple[int, int, bytes]] = []
        end_of_data = len(buf)
        pos = 0
        while end_of_data - pos >= 4:
            (length,) = _LENGTH.unpack_from(buf, pos)
            if length < 5 or length > self._max:
                raise FrameError(f"frame length {length} out of range")
            end = pos + 4 + length
            if end > end_of_data:
                break
            request_id, op = _ID_OP.unpack_from(buf, pos + 4)
            frames.append((request_id, op, bytes(buf[pos + 9 : end])))
            pos = end
        if pos:
            del buf[:pos]
        return frames
