"""The envelope an encrypted message is stored in: encoding and AEAD only, no key management, no I/O.

A message sent to a queue with server-side encryption is stored (by the worker, in its log, on the
replication stream and in snapshots) as one ``bytes`` envelope in place of its body::

    0       1           3          4           6       6+A          6+A+I        H = 6+A+I+W  H+12
    +-------+-----------+----------+-----------+-------+------------+------------+-------+---------------------+
    | 0x01  | A: uint16 | I: uint8 | W: uint16 | queue | message id | wrapped    | nonce | AES-256-GCM         |
    |version| ARN length| id length| key length| ARN   | (as sent)  | data key   | 12 B  | ciphertext + 16 B tag|
    +-------+-----------+----------+-----------+-------+------------+------------+-------+---------------------+

    wrapped data key (W bytes) = K: uint16 | KMS key ARN (K bytes) | the data key as KMS encrypted it

The plaintext is the message's body, attributes and their MD5s (:func:`pack_plaintext`).  The associated
data is the header (everything before the nonce): the queue ARN and the message id the message was sent
with, the KMS key and the wrapped data key are authenticated with the ciphertext, so an envelope edited to
name another queue, message or key does not open.  The header names the queue and id the message was *sent*
with, because a message may be read from another queue (dead-letter redrive, move tasks) and under another
id (a move task's copy has an id of its own); the queue ARN is also the encryption context KMS bound the
data key to.

Nonces are random: a data key encrypts at most :data:`MAX_MESSAGES_PER_DATA_KEY` messages, which keeps the
chance of a repeated nonce below 2^-40.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import msgpack
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ferrymq.ids import random_bytes
from ferrymq.packing import pack

VERSION = 1
NONCE_BYTES = 12
TAG_BYTES = 16
MAX_MESSAGES_PER_DATA_KEY = 2**28
"""Messages one data key may encrypt: with random 96-bit nonces, (2^28)^2 / 2^97 = 2^-41 collision odds."""

_HEAD = struct.Struct(">BHBH")
_KEY_ARN_LEN = struct.Struct(">H")


class EnvelopeError(ValueError):
    """An envelope that is malformed, of an unknown version, or fails authentication."""


class WrappedKey(NamedTuple):
    """A data key as KMS encrypted it, and the KMS key that did."""

    key_arn: str
    ciphertext: bytes

    def encode(self) -> bytes:
        arn = self.key_arn.encode()
        return _KEY_ARN_LEN.pack(len(arn)) + arn + self.ciphertext

    @classmethod
    def decode(cls, data: bytes) -> WrappedKey:
        if len(data) < _KEY_ARN_LEN.size:
            raise EnvelopeError("wrapped data key is truncated")
        (length,) = _KEY_ARN_LEN.unpack_from(data)
        end = _KEY_ARN_LEN.size + length
        if len(data) <= end:
            raise EnvelopeError("wrapped data key is truncated")
        try:
            arn = data[_KEY_ARN_LEN.size:end].decode()
        except UnicodeDecodeError:
            raise EnvelopeError("wrapped data key names no key ARN") from None
        return cls(arn, bytes(data[end:]))


class Sealer:
    """Seals the messages a request sends to one queue under one data key: of each header only the message id
    changes, so the rest is built once (the header cost as much as the encryption)."""

    __slots__ = ("_aead", "_id_length", "_prefix", "_queue_arn", "_wrapped_key")

    def __init__(self, aead: AESGCM, queue_arn: bytes, wrapped_key: bytes) -> None:
        """``queue_arn`` (UTF-8) the messages are sent to, whose data key KMS wrapped as ``wrapped_key`` (a
        :meth:`WrappedKey.encode`)."""
        if len(queue_arn) > 0xFFFF or len(wrapped_key) > 0xFFFF:
            raise ValueError("queue ARN or wrapped key too long for an envelope")
        self._aead, self._queue_arn, self._wrapped_key = aead, queue_arn, wrapped_key
        self._id_length = -1
        self._prefix = b""

    def seal(self, message_id: str, plaintext: bytes) -> bytes:
        """``plaintext`` encrypted as the envelope of message ``message_id``."""
        mid = message_id.encode()
        if len(mid) != self._id_length:
            if len(mid) > 0xFF:
                raise ValueError("message id too long for an envelope")
            self._prefix = _HEAD.pack(VERSION, len(self._queue_arn), len(mid), len(self._wrapped_key)) + self._queue_arn
            self._id_length = len(mid)
        head = self._prefix + mid + self._wrapped_key
        nonce = random_bytes(NONCE_BYTES)
        return b"".join((head, nonce, self._aead.encrypt(nonce, plaintext, head)))



class Opened(NamedTuple):
    """What an envelope's header says; :func:`open_sealed` decrypts the rest."""

    queue_arn: str
    message_id: str
    wrapped_key: bytes
    """As stored: :meth:`WrappedKey.decode` reads it; as bytes it keys caches of unwrapped keys."""
    head_end: int


def read_header(envelope: bytes) -> Opened:
    """The queue ARN, message id and wrapped key an envelope names (not yet authenticated: :func:`open_sealed`
    checks them)."""
    if len(envelope) < _HEAD.size:
        raise EnvelopeError("envelope is truncated")
    version, arn_len, id_len, key_len = _HEAD.unpack_from(envelope)
    if version != VERSION:
        raise EnvelopeError(f"unknown envelope version {version}")
    arn_end = _HEAD.size + arn_len
    id_end = arn_end + id_len
    head_end = id_end + key_len
    if len(envelope) < head_end + NONCE_BYTES + TAG_BYTES:
        raise EnvelopeError("envelope is truncated")
    try:
        queue_arn = envelope[_HEAD.size:arn_end].decode()
        message_id = envelope[arn_end:id_end].decode()
    except UnicodeDecodeError:
        raise EnvelopeError("envelope names no queue ARN or message id") from None
    return Opened(queue_arn, message_id, bytes(envelope[id_end:head_end]), head_end)


def open_sealed(aead: AESGCM, envelope: bytes, opened: Opened) -> bytes:
    """The plaintext of ``envelope`` (whose header ``opened`` read), if it and its header authenticate."""
    head_end = opened.head_end
    nonce_end = head_end + NONCE_BYTES
    try:
        return aead.decrypt(envelope[head_end:nonce_end], envelope[nonce_end:], envelope[:head_end])
    except InvalidTag:
        raise EnvelopeError("envelope does not authenticate (tampered with, or under another key)") from None


def pack_plaintext(body: str, attrs: Any, md5_body: str, md5_attrs: str | None) -> bytes:
    """What an envelope protects: the body, the attributes and their MD5s (clients check those MD5s, and kept
    outside they would fingerprint the plaintext)."""
    return pack((body, attrs, md5_body, md5_attrs))


def unpack_plaintext(data: bytes) -> tuple[str, dict, str, str | None]:
    try:
        body, attrs, md5_body, md5_attrs = msgpack.unpackb(data, raw=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise EnvelopeError(f"envelope plaintext is malformed: {exc}") from None
    if not isinstance(body, str) or not isinstance(attrs, dict) or not isinstance(md5_body, str):
        raise EnvelopeError("envelope plaintext is malformed")
    return body, attrs, md5_body, md5_attrs
