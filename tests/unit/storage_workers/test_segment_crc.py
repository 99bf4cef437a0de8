"""``crc_of``: a segment's CRC-32 read a window at a time, keeping to a share of a core when asked."""

from __future__ import annotations

import itertools
import os
import zlib
from pathlib import Path

import pytest

from ferrymq.storage.log.segments import crc_of


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(os.urandom(5_000))
    return path


@pytest.mark.parametrize("size", [0, 1, 999, 1_000, 1_001, 4_999, 5_000])
def test_the_crc_is_of_the_first_size_bytes_whatever_the_window(segment: Path, size: int) -> None:
    assert crc_of(segment, size, window=1_000) == zlib.crc32(segment.read_bytes()[:size])


def test_a_file_shorter_than_the_size_has_none(segment: Path) -> None:
    assert crc_of(segment, 5_001, window=1_000) is None


def test_a_share_of_a_core_sleeps_three_times_what_each_window_spent_at_a_quarter(segment: Path) -> None:
    ticks = itertools.count()
    slept: list[float] = []
    crc = crc_of(segment, 5_000, window=1_000, cpu_share=0.25, cpu_clock=lambda: next(ticks) * 0.01,
                 sleep=slept.append)
    assert crc == zlib.crc32(segment.read_bytes())
    # five windows, each 10 ms of CPU on this clock: a sleep of 30 ms after each but the last
    assert slept == pytest.approx([0.03] * 4)


@pytest.mark.parametrize("share", [1.0, 0.0, 2.0])
def test_a_whole_core_or_a_share_that_means_nothing_never_sleeps(segment: Path, share: float) -> None:
    slept: list[float] = []
    crc_of(segment, 5_000, window=1_000, cpu_share=share, sleep=slept.append)
    assert slept == []
