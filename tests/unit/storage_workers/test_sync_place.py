"""Where group commits are synced: in the I/O thread at first and for a calm period after any slow sync, on the
event loop otherwise; 0 keeps them in the thread for good."""

from __future__ import annotations

import logging

import pytest

from ferrymq.storage.log.sync_place import SyncPlace


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_worker_starts_with_its_syncs_in_the_thread_and_moves_them_to_the_loop_once_calm() -> None:
    clock = Clock()
    place = SyncPlace(0.002, calm_seconds=10.0, clock=clock)
    assert not place.on_loop()
    clock.now += 9.9
    assert not place.on_loop()
    clock.now += 0.1
    assert place.on_loop()


@pytest.mark.parametrize("on_loop", [True, False])
def test_one_slow_sync_wherever_it_ran_sends_syncs_to_the_thread_for_the_calm_period(
    on_loop: bool, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    place = SyncPlace(0.002, calm_seconds=10.0, clock=clock)
    clock.now += 10
    assert place.on_loop()
    # quick syncs change nothing
    for _ in range(100):
        place.observe(0.0019, on_loop=True)
    assert place.on_loop() and place.slow_syncs == 0 and place.on_loop_syncs == 100
    # one at the limit sends them to the thread, and says so
    with caplog.at_level(logging.INFO, logger="ferrymq.storage.log.sync_place"):
        place.observe(0.002, on_loop=on_loop)
    assert not place.on_loop() and place.slow_syncs == 1
    assert "an fdatasync took 2.0 ms" in caplog.text and "for the next 10 s" in caplog.text
    # another slow one during the calm period starts it again, without saying so again
    clock.now += 8
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ferrymq.storage.log.sync_place"):
        place.observe(0.050, on_loop=False)
    assert caplog.text == ""
    clock.now += 9.9
    assert not place.on_loop()
    clock.now += 0.1
    assert place.on_loop()


def test_zero_keeps_every_sync_in_the_thread() -> None:
    clock = Clock()
    place = SyncPlace(0, calm_seconds=0, clock=clock)
    clock.now += 3600
    place.observe(0.5, on_loop=False)
    assert not place.on_loop() and place.slow_syncs == 0


@pytest.mark.parametrize("quick, calm", [(-0.001, 10.0), (0.002, -1.0)])
def test_negative_limits_are_refused(quick: float, calm: float) -> None:
    with pytest.raises(ValueError, match="not negative"):
        SyncPlace(quick, calm_seconds=calm)
