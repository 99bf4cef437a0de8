"""Receipt handles: what they name, that only their partition's key mints them, and that anything else is refused."""

from __future__ import annotations

import base64
from hashlib import blake2b

import pytest

from ferrymq.storage.engine.receipts import HANDLE_LENGTH, Receipt, Receipts
from tests.support.engine_requests import unkeyed_handle

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def test_a_handle_names_queue_message_and_receive() -> None:
    # given the receipts of a partition
    receipts = Receipts(KEY)
    qtag, idtag = receipts.queue_tag("queue-1"), receipts.id_tag("message-1")
    # when a handle is minted
    handle = receipts.encode(qtag, 123456789, 3, idtag)
    # then it is fixed-length, URL-safe base64 without padding, and reads back as what it names
    assert len(handle) == HANDLE_LENGTH
    assert base64.urlsafe_b64encode(base64.urlsafe_b64decode(handle)).decode() == handle
    assert "=" not in handle and set(handle) <= set(ALPHABET)
    assert receipts.decode(handle) == Receipt(qtag, 123456789, 3, idtag)


def test_tags_depend_on_the_key_and_are_not_unkeyed_digests() -> None:
    # given two partitions' receipts
    mine, theirs = Receipts(KEY), Receipts(OTHER_KEY)
    # then the same queue and message ids get different tags under each key, unlike anything computable
    # without a key, and a queue id and a message id of the same text get different tags
    assert mine.queue_tag("q") != theirs.queue_tag("q")
    assert mine.id_tag("m") != theirs.id_tag("m")
    assert mine.queue_tag("q") != blake2b(b"q", digest_size=8).digest()
    assert mine.id_tag("m") != blake2b(b"m", digest_size=8).digest()
    assert mine.queue_tag("same") != mine.id_tag("same")
    # and the same key always gives the same tags (a restarted or taking-over engine recognises its handles)
    assert Receipts(KEY).queue_tag("q") == mine.queue_tag("q")


def test_a_handle_minted_with_another_key_is_refused() -> None:
    # given a handle minted by another partition, for the same queue id, message id and receive
    mine, theirs = Receipts(KEY), Receipts(OTHER_KEY)
    foreign = theirs.encode(theirs.queue_tag("q"), 42, 1, theirs.id_tag("m"))
    # when this partition reads it, then it is no handle at all
    assert mine.decode(foreign) is None
    # and neither is one that carries this partition's tags but was authenticated with another key
    spliced = theirs.encode(mine.queue_tag("q"), 42, 1, mine.id_tag("m"))
    assert mine.decode(spliced) is None


def test_a_handle_whose_fields_were_changed_is_refused() -> None:
    # given a genuine handle, and the same bytes with the receive number or sequence number changed
    receipts = Receipts(KEY)
    handle = receipts.encode(receipts.queue_tag("q"), 42, 1, receipts.id_tag("m"))
    raw = bytearray(base64.urlsafe_b64decode(handle))
    for offset, size, value in [(17, 4, 2), (9, 8, 43)]:
        forged = bytearray(raw)
        forged[offset : offset + size] = value.to_bytes(size, "big")
        # when it is read, then the MAC does not match and it is refused
        assert receipts.decode(base64.urlsafe_b64encode(bytes(forged)).decode()) is None


def test_a_version_1_handle_made_without_the_key_is_refused() -> None:
    # given a handle as anyone knowing the queue id, message id and sequence number could make it before
    old = unkeyed_handle("q", 42, 2, "m")
    # then it is refused
    assert Receipts(KEY).decode(old) is None


def test_every_single_character_change_is_refused() -> None:
    receipts = Receipts(KEY)
    handle = receipts.encode(receipts.queue_tag("q"), 42, 1, receipts.id_tag("m"))
    for i in range(len(handle)):
        for c in ALPHABET[::7]:
            if c == handle[i]:
                continue
            garbled = handle[:i] + c + handle[i + 1 :]
            assert receipts.decode(garbled) is None, garbled


def test_non_handles_are_refused() -> None:
    receipts = Receipts(KEY)
    for value in ["", "x" * HANDLE_LENGTH, "é" * HANDLE_LENGTH, None, 42, b"bytes", "a" * 500]:
        assert receipts.decode(value) is None


@pytest.mark.parametrize("key", [b"", b"short", bytes(15), bytes(65), "a text, not bytes" * 2])
def test_a_key_too_short_too_long_or_not_bytes_is_rejected(key: object) -> None:
    with pytest.raises(ValueError):
        Receipts(key)  # type: ignore[arg-type]
