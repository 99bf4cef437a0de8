"""Receipt handles: opaque, URL-safe strings naming one receive of one message of one queue.

    byte   0        1            9          17              21           29        33
           +--------+------------+----------+---------------+------------+---------+
           | ver=1  | queue tag  | seq      | receive no.   | id tag     | crc32   |
           | u8     | 8 bytes    | u64      | u32           | 8 bytes    | u32     |
           +--------+------------+----------+---------------+------------+---------+

``queue tag`` and ``id tag`` are BLAKE2b digests of the queue id and the message id: a handle made for
another queue, or for an older message that happened to have the same sequence number, does not match.
The CRC catches garbled handles.  33 bytes make exactly 44 base64url characters, no padding.
"""

from __future__ import annotations

import base64
import binascii
import struct
from hashlib import blake2b
from typing import NamedTuple
from zlib import crc32

_BODY = struct.Struct(">B8sQI8s")
_CRC = struct.Struct(">I")
_VERSION = 1
_RAW_SIZE = _BODY.size + _CRC.size  # 33
HANDLE_LENGTH = 44


class Receipt(NamedTuple):
    queue_tag: bytes
    seq: int
    receive_no: int
    id_tag: bytes


def tag(value: str) -> bytes:
    """The 8-byte digest used for queue ids and message ids."""
    return blake2b(value.encode(), digest_size=8).digest()


def encode(queue_tag: bytes, seq: int, receive_no: int, id_tag: bytes) -> str:
    body = _BODY.pack(_VERSION, queue_tag, seq, receive_no, id_tag)
    return base64.urlsafe_b64encode(body + _CRC.pack(crc32(body))).decode("ascii")


def decode(handle: object) -> Receipt | None:
    """The receipt a handle stands for, or None when it is not one this worker minted."""
    if not isinstance(handle, str) or len(handle) != HANDLE_LENGTH:
        return None
    try:
        raw = base64.urlsafe_b64decode(handle.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None
    if len(raw) != _RAW_SIZE:
        return None
    body = raw[: _BODY.size]
    if _CRC.unpack_from(raw, _BODY.size)[0] != crc32(body):
        return None
    version, queue_tag, seq, receive_no, id_tag = _BODY.unpack(body)
    if version != _VERSION:
        return None
    return Receipt(queue_tag, seq, receive_no, id_tag)
