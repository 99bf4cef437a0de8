"""The worker fixes glibc's mmap threshold, and starts as before where it cannot."""

from __future__ import annotations

import ctypes.util
import platform

import pytest

from ferrymq.storage.server import allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the threshold is glibc's")
def test_on_glibc_the_threshold_is_set() -> None:
    assert allocator.keep_large_blocks_mapped() is True


def test_without_a_c_library_to_find_nothing_is_set_and_nothing_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert allocator.keep_large_blocks_mapped() is False

