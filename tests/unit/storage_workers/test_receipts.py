"""Receipt handles: what they name, and that anything else is refused."""

from __future__ import annotations

import base64

from storage_workers.engine import receipts


def test_a_handle_names_queue_message_and_receive() -> None:
    qtag, idtag = receipts.tag("queue-1"), receipts.tag("message-1")
    handle = receipts.encode(qtag, 123456789, 3, idtag)
    assert len(handle) == receipts.HANDLE_LENGTH
    assert base64.urlsafe_b64encode(base64.urlsafe_b64decode(handle)).decode() == handle  # URL-safe, no padding
    assert "=" not in handle
    assert receipts.decode(handle) == receipts.Receipt(qtag, 123456789, 3, idtag)


def test_every_single_character_change_is_refused() -> None:
    qtag, idtag = receipts.tag("q"), receipts.tag("m")
    handle = receipts.encode(qtag, 42, 1, idtag)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for i in range(len(handle)):
        for c in alphabet[:8]:
            if c == handle[i]:
                continue
            garbled = handle[:i] + c + handle[i + 1 :]
            assert receipts.decode(garbled) is None, garbled


def test_non_handles_are_refused() -> None:
    for value in ["", "x" * receipts.HANDLE_LENGTH, "é" * receipts.HANDLE_LENGTH, None, 42, b"bytes", "a" * 500]:
        assert receipts.decode(value) is None
