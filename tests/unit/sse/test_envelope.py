"""The stored envelope: what it authenticates, and that anything else does not open."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ferrymq.sse.envelope import (
    EnvelopeError,
    Sealer,
    WrappedKey,
    open_sealed,
    pack_plaintext,
    read_header,
    unpack_plaintext,
)

QUEUE = "arn:aws:sqs:us-east-1:000000000000:orders"
KEY = WrappedKey("arn:aws:kms:us-east-1:000000000000:key/1234abcd-12ab-34cd-56ef-1234567890ab", os.urandom(96))
ATTRS = {"kind": {"DataType": "String", "StringValue": "parcel"}, "raw": {"DataType": "Binary", "BinaryValue": b"\0\1"}}


def _sealed(aead: AESGCM, message_id: str = "m-1", queue: str = QUEUE) -> bytes:
    plaintext = pack_plaintext("hello, world", ATTRS, "md5-body", "md5-attrs")
    return Sealer(aead, queue.encode(), KEY.encode()).seal(message_id, plaintext)


def _open(aead: AESGCM, envelope: bytes) -> tuple:
    return unpack_plaintext(open_sealed(aead, envelope, read_header(envelope)))


def _with_header_field(envelope: bytes, old: str, new: str) -> bytes:
    """``envelope`` with a header field of the same length replaced (its associated data changed)."""
    head_end = read_header(envelope).head_end
    assert len(old) == len(new) and old.encode() in envelope[:head_end]
    return envelope[:head_end].replace(old.encode(), new.encode()) + envelope[head_end:]


def test_an_envelope_opens_to_what_was_sealed_and_names_its_queue_and_key() -> None:
    # given a message sealed for a queue under a wrapped data key
    aead = AESGCM(AESGCM.generate_key(256))
    envelope = _sealed(aead)
    # when its header is read and it is opened with the same key and message id
    opened = read_header(envelope)
    # then it names the queue and id it was sent with and the KMS key, and gives back body, attributes and MD5s
    assert (opened.queue_arn, opened.message_id) == (QUEUE, "m-1")
    assert WrappedKey.decode(opened.wrapped_key) == KEY
    assert _open(aead, envelope) == ("hello, world", ATTRS, "md5-body", "md5-attrs")
    assert b"hello, world" not in envelope and b"parcel" not in envelope


def test_two_seals_of_the_same_message_differ() -> None:
    aead = AESGCM(AESGCM.generate_key(256))
    assert _sealed(aead) != _sealed(aead)


@pytest.mark.parametrize("position", ["version", "queue_arn", "message_id", "wrapped_key", "nonce", "ciphertext",
                                      "tag"])
def test_a_tampered_envelope_does_not_open(position: str) -> None:
    # given a sealed message
    aead = AESGCM(AESGCM.generate_key(256))
    envelope = bytearray(_sealed(aead))
    head_end = read_header(bytes(envelope)).head_end
    where = {
        "version": 0,
        "queue_arn": 6 + QUEUE.index("orders"),
        "message_id": 6 + len(QUEUE) + 2,
        "wrapped_key": head_end - 1,
        "nonce": head_end + 3,
        "ciphertext": head_end + 12 + 2,
        "tag": len(envelope) - 1,
    }[position]
    # when one byte of it is changed
    envelope[where] ^= 0x01
    # then it does not open
    with pytest.raises(EnvelopeError):
        _open(aead, bytes(envelope))


def test_an_envelope_claiming_another_message_id_does_not_open() -> None:
    # given a sealed message whose header is edited to name another message id of the same length
    aead = AESGCM(AESGCM.generate_key(256))
    envelope = _with_header_field(_sealed(aead, message_id="m-1"), "m-1", "m-2")
    # then it does not authenticate
    with pytest.raises(EnvelopeError, match="does not authenticate"):
        _open(aead, envelope)


def test_an_envelope_naming_another_queue_does_not_open() -> None:
    # given the same ciphertext under a header that names another queue (its associated data changed)
    aead = AESGCM(AESGCM.generate_key(256))
    other = _with_header_field(_sealed(aead), "orders", "others")
    assert read_header(other).queue_arn.endswith(":others")
    with pytest.raises(EnvelopeError, match="does not authenticate"):
        _open(aead, other)


def test_the_same_message_sealed_for_two_queues_differs_in_what_it_names() -> None:
    aead = AESGCM(AESGCM.generate_key(256))
    assert read_header(_sealed(aead, queue=QUEUE + "-dlq")).queue_arn == QUEUE + "-dlq"
    assert _open(aead, _sealed(aead, queue=QUEUE + "-dlq"))[0] == "hello, world"


def test_an_envelope_does_not_open_under_another_data_key() -> None:
    envelope = _sealed(AESGCM(AESGCM.generate_key(256)))
    with pytest.raises(EnvelopeError):
        _open(AESGCM(AESGCM.generate_key(256)), envelope)


@pytest.mark.parametrize("envelope", [b"", b"\x01", b"\x01\x00\x05\x01\x00\x05abc", b"\x02" + bytes(60)])
def test_a_truncated_or_unknown_envelope_is_refused(envelope: bytes) -> None:
    with pytest.raises(EnvelopeError):
        read_header(envelope)


def test_a_wrapped_key_without_its_ciphertext_is_refused() -> None:
    arn_only = KEY.encode()[: 2 + len(KEY.key_arn)]
    with pytest.raises(EnvelopeError):
        WrappedKey.decode(arn_only)
    with pytest.raises(EnvelopeError):
        WrappedKey.decode(b"\x00")


def test_plaintext_that_is_not_a_message_is_refused() -> None:
    with pytest.raises(EnvelopeError):
        unpack_plaintext(b"\xc1")
    with pytest.raises(EnvelopeError):
        unpack_plaintext(pack_plaintext(1, {}, "m", None))  # type: ignore[arg-type]


def test_one_sealer_seals_a_request_s_messages_each_under_its_own_id_whatever_their_lengths() -> None:
    # given one sealer for a queue and data key, and messages whose ids differ in length (its header is rebuilt)
    aead = AESGCM(AESGCM.generate_key(256))
    sealer = Sealer(aead, QUEUE.encode(), KEY.encode())
    ids = ["0f8fad5b-d9cb-469f-a165-70867728950e", "7c9e6679-7425-40de-944b-e07fc1f90ae7", "short", "é" * 10,
           "0f8fad5b-d9cb-469f-a165-70867728950f"]
    envelopes = [sealer.seal(mid, pack_plaintext(f"body {i}", {}, f"md5 {i}", None)) for i, mid in enumerate(ids)]
    # then each opens to its own message and names its own id, queue and key
    for i, (mid, envelope) in enumerate(zip(ids, envelopes, strict=True)):
        opened = read_header(envelope)
        assert (opened.queue_arn, opened.message_id) == (QUEUE, mid)
        assert WrappedKey.decode(opened.wrapped_key) == KEY
        assert _open(aead, envelope) == (f"body {i}", {}, f"md5 {i}", None)


@pytest.mark.parametrize(("queue_arn", "wrapped", "message_id"), [
    ("q" * 0x10000, KEY.encode(), "m-1"),  # an ARN longer than its length field holds
    (QUEUE, b"k" * 0x10000, "m-1"),  # a wrapped key longer than its length field holds
    (QUEUE, KEY.encode(), "m" * 256),  # an id longer than its length field holds
    (QUEUE, KEY.encode(), "é" * 128),  # 256 bytes as UTF-8, though 128 characters
])
def test_what_an_envelope_header_cannot_hold_is_refused(queue_arn: str, wrapped: bytes, message_id: str) -> None:
    aead = AESGCM(AESGCM.generate_key(256))
    with pytest.raises(ValueError):
        Sealer(aead, queue_arn.encode(), wrapped).seal(message_id, b"plaintext")
