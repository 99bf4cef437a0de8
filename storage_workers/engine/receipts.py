"""Receipt handles: opaque, URL-safe strings naming one receive of one message of one queue, authenticated
with the partition's secret.

    byte   0        1            9          17              21           29                  39
           +--------+------------+----------+---------------+------------+-------------------+
           | ver=2  | queue tag  | seq      | receive no.   | id tag     | mac               |
           | u8     | 8 bytes    | u64      | u32           | 8 bytes    | 10 bytes          |
           +--------+------------+----------+---------------+------------+-------------------+

``queue tag`` and ``id tag`` are BLAKE2b digests of the queue id and the message id keyed with the secret:
a handle made for another queue, or for an older message that happened to have the same sequence number,
does not match, and nobody without the secret can compute them from a MessageId.  ``mac`` is a keyed BLAKE2b
of the 29 bytes before it, so a handle whose fields were changed (another receive number, another sequence
number) or were made up is refused; a garbled handle fails the same check.  The three digests use distinct
personalisations, so one can never stand in for another.  39 bytes make exactly 52 base64url characters, no
padding.  Version 1 handles (unkeyed tags, CRC32 trailer) are refused: anyone could mint them.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import struct
from hashlib import blake2b
from typing import NamedTuple

_BODY = struct.Struct(">B8sQI8s")
_VERSION = 2
_TAG_SIZE = 8
_MAC_SIZE = 10
_RAW_SIZE = _BODY.size + _MAC_SIZE  # 39
HANDLE_LENGTH = 52

MIN_KEY_BYTES = 16
MAX_KEY_BYTES = 64
"""BLAKE2b takes keys of up to 64 bytes; fewer than 16 would be guessable."""


class Receipt(NamedTuple):
    queue_tag: bytes
    seq: int
    receive_no: int
    id_tag: bytes


class Receipts:
    """Mints and reads the receipt handles of one partition, keyed with the partition's secret."""

    __slots__ = ("_id_hash", "_mac_hash", "_queue_hash")

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
            raise ValueError(f"a receipt key is {MIN_KEY_BYTES} to {MAX_KEY_BYTES} bytes")
        # Keyed hashers are copied for each digest: cheaper than keying a new one every time.
        self._queue_hash = blake2b(digest_size=_TAG_SIZE, key=key, person=b"ferrymq.queue")
        self._id_hash = blake2b(digest_size=_TAG_SIZE, key=key, person=b"ferrymq.message")
        self._mac_hash = blake2b(digest_size=_MAC_SIZE, key=key, person=b"ferrymq.receipt")

    def queue_tag(self, queue_id: str) -> bytes:
        h = self._queue_hash.copy()
        h.update(queue_id.encode())
        return h.digest()

    def id_tag(self, message_id: str) -> bytes:
        h = self._id_hash.copy()
        h.update(message_id.encode())
        return h.digest()

    def _mac(self, body: bytes) -> bytes:
        h = self._mac_hash.copy()
        h.update(body)
        return h.digest()

    def encode(self, queue_tag: bytes, seq: int, receive_no: int, id_tag: bytes) -> str:
        body = _BODY.pack(_VERSION, queue_tag, seq, receive_no, id_tag)
        return base64.urlsafe_b64encode(body + self._mac(body)).decode("ascii")

    def decode(self, handle: object) -> Receipt | None:
        """The receipt a handle stands for, or None when it is not one minted with this key."""
        if not isinstance(handle, str) or len(handle) != HANDLE_LENGTH:
            return None
        try:
            raw = base64.urlsafe_b64decode(handle.encode("ascii"))
        except (binascii.Error, UnicodeEncodeError, ValueError):
            return None
        if len(raw) != _RAW_SIZE:
            return None
        body = raw[: _BODY.size]
        if not hmac.compare_digest(raw[_BODY.size :], self._mac(body)):
            return None
        version, queue_tag, seq, receive_no, id_tag = _BODY.unpack(body)
        if version != _VERSION:
            return None
        return Receipt(queue_tag, seq, receive_no, id_tag)


class KeyNotRead(Receipts):
    """A partition's receipts before its key is read: a worker recovers its logs before it reaches the table the
    keys live in (``PartitionMap.receipt_key``), and is given them before it serves. Minting or reading a handle
    meanwhile is a bug, refused rather than answered with handles no other replica would take."""

    __slots__ = ()

    def __init__(self) -> None:
        pass

    def queue_tag(self, queue_id: str) -> bytes:
        raise _key_not_read()

    def id_tag(self, message_id: str) -> bytes:
        raise _key_not_read()

    def _mac(self, body: bytes) -> bytes:
        raise _key_not_read()


def _key_not_read() -> RuntimeError:
    return RuntimeError("the partition's receipt key has not been read yet")
