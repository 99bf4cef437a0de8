"""The log's epoch history, without disks: what a rejoining follower truncates to."""

from __future__ import annotations

import pytest

from ferrymq.storage.log.epochs import EpochHistory, EpochRegressed, readable


def history_of(records: list[tuple[int, int]]) -> EpochHistory:
    """The history of records given as ``(epoch, offset)``."""
    history = EpochHistory()
    for epoch, offset in records:
        history.observe(epoch, offset)
    return history


def test_each_epoch_is_noted_at_its_first_record() -> None:
    history = history_of([(0, 1), (0, 2), (2, 3), (2, 4), (5, 5)])
    assert history.entries == [(0, 1), (2, 3), (5, 5)]
    assert history.latest == 5
    assert EpochHistory().latest is None


def test_the_end_of_an_epoch_is_the_first_offset_of_the_next_higher_one_or_the_log_end() -> None:
    # given epochs 0 (offsets 1-2), 2 (3-4) and 5 (5), log end 6
    history = history_of([(0, 1), (0, 2), (2, 3), (2, 4), (5, 5)])
    # then a follower whose last record was of epoch 0 or 1 keeps up to 2; of 2-4 up to 4; of 5 or later everything
    answers = [history.end_offset_for(epoch, 6) for epoch in range(7)]
    assert [(a.epoch, a.end_offset) for a in answers if a is not None] == [
        (0, 3), (0, 3), (2, 5), (2, 5), (2, 5), (5, 6), (5, 6)
    ]


def test_an_epoch_older_than_the_whole_history_gets_no_answer() -> None:
    # a follower at epoch 1 whose leader's (compacted) history starts with epoch 3: only a snapshot helps it
    assert EpochHistory([(3, 40)]).end_offset_for(1, 90) is None
    assert EpochHistory().end_offset_for(1, 1) is None


def test_an_epoch_going_back_is_refused() -> None:
    history = history_of([(0, 1), (3, 4)])
    with pytest.raises(EpochRegressed):
        history.observe(2, 5)
    with pytest.raises(EpochRegressed):
        EpochHistory([(1, 5), (2, 5)])
    assert history.entries == [(0, 1), (3, 4)]


def test_truncating_forgets_the_epochs_that_start_after_the_cut() -> None:
    history = history_of([(0, 1), (2, 3), (5, 5)])
    assert history.upto(4).entries == [(0, 1), (2, 3)]
    assert history.upto(5).entries == [(0, 1), (2, 3), (5, 5)]
    assert history.upto(0).entries == []
    history.truncate_after(2)
    assert history.entries == [(0, 1)]
    history.observe(1, 3)
    assert history.entries == [(0, 1), (1, 3)]


def test_a_history_round_trips_through_its_frame_payload() -> None:
    history = history_of([(0, 1), (2, 3), (2**32 - 1, 2**63)])
    assert EpochHistory.decode(history.encode()) == history
    assert readable(history.encode())
    for junk in [b"\xc1", b"\x91\x01", b"\x91\x92\x01\xa1x", b"\x92\x92\x05\x01\x92\x04\x02"]:
        assert not readable(junk)
