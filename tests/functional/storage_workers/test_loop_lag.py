"""The worker's event-loop lag monitor on a real loop: a held loop shows as one late wake of about that length,
in the histogram and as the worst of the last minute, which it forgets a minute later; with a trace threshold,
a loop held past it has every thread's stack written to standard error while it is held."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ferrymq.settings import Settings
from ferrymq.storage.server.config import WorkerConfig
from ferrymq.storage.server.loop_lag import WINDOW_SECONDS, LoopLagMonitor


def _count_above(monitor: LoopLagMonitor, seconds: float) -> float:
    """Observations of the histogram over ``seconds`` (its +Inf count less the bucket at ``seconds``)."""
    samples = {(s.name, s.labels.get("le")): s.value for m in monitor.histogram.collect() for s in m.samples}
    return samples[("ferrymq_worker_loop_lag_seconds_bucket", "+Inf")] - samples[
        ("ferrymq_worker_loop_lag_seconds_bucket", str(seconds))
    ]


def test_a_loop_held_for_300_ms_is_seen_as_one_late_wake_of_about_that_length() -> None:
    async def run() -> LoopLagMonitor:
        monitor = LoopLagMonitor(interval=0.01)
        monitor.start()
        await asyncio.sleep(0.05)
        # given a quiet loop, nothing near 100 ms was seen
        assert monitor.worst < 0.1
        # when something holds the loop for 300 ms (as a replay on the loop would)
        time.sleep(0.3)
        await asyncio.sleep(0.05)
        await monitor.stop()
        return monitor

    monitor = asyncio.run(run())
    # then the worst of the last minute is that stall, and the histogram has exactly one wake that late
    assert 0.25 <= monitor.worst < 1.0
    assert _count_above(monitor, 0.25) == 1


def test_the_worst_stall_is_forgotten_a_minute_later() -> None:
    now = [1000.0]
    monitor = LoopLagMonitor(clock=lambda: now[0])
    monitor.record(0.4)
    now[0] += 15
    monitor.record(0.02)
    assert monitor.worst == 0.4
    # when more than a minute passed since the stall, with quiet wakes meanwhile
    for _ in range(5):
        now[0] += 12
        monitor.record(0.002)
    # then the worst is the quiet wakes', not the old stall nor the wake 15 s after it
    assert now[0] - 1015.0 >= WINDOW_SECONDS
    assert monitor.worst == 0.002
    # and a minute without any wake recorded leaves nothing
    now[0] += WINDOW_SECONDS
    assert monitor.worst == 0.0


def test_the_monitor_runs_as_a_timer_with_no_task_and_stops_for_good() -> None:
    async def run() -> tuple[int, int, float]:
        # given a loop with no task but this test's
        before = len(asyncio.all_tasks())
        monitor = LoopLagMonitor(interval=0.01)
        # when the monitor runs for a while
        monitor.start()
        await asyncio.sleep(0.1)
        during = len(asyncio.all_tasks())
        seen = _count_above(monitor, 0.001) + _count_below(monitor, 0.001)
        await monitor.stop()
        # then it ran with no task of its own, recording its wakes, and records none once stopped
        await asyncio.sleep(0.05)
        assert _count_above(monitor, 0.001) + _count_below(monitor, 0.001) == seen
        return before, during, seen

    before, during, seen = asyncio.run(run())
    assert during == before
    assert seen >= 1


def _count_below(monitor: LoopLagMonitor, seconds: float) -> float:
    """Observations of the histogram at or under ``seconds``."""
    samples = {(s.name, s.labels.get("le")): s.value for m in monitor.histogram.collect() for s in m.samples}
    return samples[("ferrymq_worker_loop_lag_seconds_bucket", str(seconds))]


_HELD_LOOP = """
import asyncio, gc, sys, time
from ferrymq.storage.server.loop_lag import LoopLagMonitor

def hold_the_loop_for(seconds):
    if seconds < 0:
        # a full collection over a million containers, which no stack shows
        held = [[] for _ in range(1_000_000)]
        gc.collect()
        del held
    else:
        time.sleep(seconds)

async def run(held):
    monitor = LoopLagMonitor(interval=0.01, trace_after=float(sys.argv[2]))
    monitor.start()
    await asyncio.sleep(0.05)
    hold_the_loop_for(held)
    await asyncio.sleep(0.05)
    await monitor.stop()
    # a stall after the monitor stopped is not traced: its watchdog went with it
    hold_the_loop_for(0.3)

asyncio.run(run(float(sys.argv[1])))
"""


def _held(seconds: float, trace_after: float = 0.15) -> str:
    done = subprocess.run([sys.executable, "-c", _HELD_LOOP, str(seconds), str(trace_after)], capture_output=True,
                          text=True,
                          timeout=30, check=True)
    return done.stderr


def test_a_loop_held_past_the_trace_threshold_has_the_code_holding_it_named_on_standard_error() -> None:
    # when a loop watched with a 150 ms threshold is held for 400 ms
    stderr = _held(0.4)
    # then the watchdog wrote the main thread's stack while it was held, naming the function holding it, once
    assert stderr.count("Timeout (") == 1, stderr
    assert "in hold_the_loop_for" in stderr
    # and the monitor said how long the loop was held once it was free again
    assert "event loop held" in stderr


def test_a_loop_held_under_the_threshold_writes_no_stack() -> None:
    stderr = _held(0.05)
    assert "Timeout (" not in stderr, stderr
    assert "event loop held" not in stderr


def test_a_long_garbage_collection_is_named_with_its_generation() -> None:
    # when the loop is held by a full collection, which no stack shows, watched with a threshold of 10 ms
    stderr = _held(-1, trace_after=0.01)
    # then the collection is named, as of the oldest generation
    assert "garbage collection of generation 2 took" in stderr, stderr


def test_the_stall_trace_threshold_is_the_workers_setting_and_off_by_default(tmp_path: Path) -> None:
    settings = Settings.from_env({"FERRYMQ_WORKER_STALL_TRACE_MS": "80"})
    assert WorkerConfig.from_settings(settings, data_dir=tmp_path).stall_trace_ms == 80
    assert WorkerConfig.from_settings(Settings.from_env({}), data_dir=tmp_path).stall_trace_ms == 0
    with pytest.raises(ValueError, match="FERRYMQ_WORKER_STALL_TRACE_MS"):
        WorkerConfig(data_dir=tmp_path, stall_trace_ms=-1)
