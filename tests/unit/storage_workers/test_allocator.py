"""The worker fixes glibc's mmap threshold, and starts as before where it cannot."""

from __future__ import annotations

import ctypes
import platform
import subprocess

import pytest

from ferrymq.storage.server import allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the threshold is glibc's")
def test_on_glibc_the_threshold_is_set() -> None:
    assert allocator.keep_large_blocks_mapped() is True


def test_it_starts_no_process_to_find_the_c_library(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a process was started")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    allocator.keep_large_blocks_mapped()


def test_a_c_library_without_mallopt_sets_nothing_and_nothing_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes, "CDLL", lambda name: object())
    assert allocator.keep_large_blocks_mapped() is False


def test_no_c_library_at_all_sets_nothing_and_nothing_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: object) -> None:
        raise OSError("no such library")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert allocator.keep_large_blocks_mapped() is False

