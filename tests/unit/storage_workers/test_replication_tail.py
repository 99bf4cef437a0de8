"""The leader's tail buffer: recent frames kept by payload bytes, read from an offset on within a budget."""

from __future__ import annotations

import pytest

from ferrymq.storage.replication.tail import TailBuffer


def test_frames_are_read_from_an_offset_within_a_byte_budget_but_at_least_one() -> None:
    # given four frames of 4 bytes
    tail = TailBuffer(100)
    for offset in range(1, 5):
        tail.add(0, offset, b"rec%d" % offset)
    # when read from offset 2 with room for two, then two come
    assert tail.read(2, 8) == [(0, 2, b"rec2"), (0, 3, b"rec3")]
    # and a budget below one frame still gets one
    assert tail.read(4, 1) == [(0, 4, b"rec4")]
    # and from the end, nothing
    assert tail.read(5, 100) == []


def test_the_oldest_frames_go_when_over_the_bound_and_the_newest_always_stays() -> None:
    tail = TailBuffer(10)
    for offset in range(1, 4):
        tail.add(1, offset, b"abcd")
    # 12 bytes held for a bound of 10: the first went
    assert (tail.first_offset, tail.end_offset, tail.bytes, len(tail)) == (2, 4, 8, 2)
    assert not tail.covers(1) and tail.covers(2) and tail.covers(4) and not tail.covers(5)
    with pytest.raises(LookupError):
        tail.read(1, 100)
    # a frame larger than the bound replaces everything but stays
    tail.add(1, 4, b"x" * 50)
    assert (tail.first_offset, tail.bytes) == (4, 50)


def test_offsets_must_follow_one_another() -> None:
    tail = TailBuffer(10)
    assert not tail.covers(1) and tail.first_offset is None
    tail.add(0, 7, b"a")
    with pytest.raises(ValueError):
        tail.add(0, 9, b"b")
    with pytest.raises(ValueError):
        TailBuffer(0)
