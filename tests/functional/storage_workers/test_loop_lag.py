"""The worker's event-loop lag monitor on a real loop: a held loop shows as one late wake of about that length,
in the histogram and as the worst of the last minute, which it forgets a minute later; with a trace threshold,
a loop held past it has every thread's stack written to standard error while it is held."""

from __future__ import annotations

import asyncio
import json
import logging
import mmap
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ferrymq.settings import Settings
from ferrymq.storage.server.config import WorkerConfig
from ferrymq.storage.server.loop_lag import NOTED_SECONDS, WINDOW_SECONDS, LoopLagMonitor, Stall


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


def test_a_trace_threshold_under_the_noted_length_still_has_each_stack_followed_by_its_stall() -> None:
    # when a loop watched with a 15 ms threshold is held for 35 ms, under the 50 ms from which stalls are noted
    stderr = _held(0.035, trace_after=0.015)
    # then its stacks are written (a busy machine may add a late wake of its own), and the stall's line with its
    # account follows them
    assert stderr.count("Timeout (") >= 1, stderr
    assert "event loop held" in stderr and "ms on a CPU" in stderr


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


def _stall_of(hold: Callable[[], None]) -> Stall:
    """The one stall a loop watched every 10 ms notes while ``hold`` holds it."""
    async def run() -> LoopLagMonitor:
        monitor = LoopLagMonitor(interval=0.01)
        monitor.start()
        await asyncio.sleep(0.05)
        hold()
        await asyncio.sleep(0.05)
        await monitor.stop()
        return monitor

    monitor = asyncio.run(run())
    assert len(monitor.stalls) == 1, monitor.stalls
    return monitor.stalls[0]


def _spin(seconds: float) -> None:
    """Run on a CPU for ``seconds`` of this thread's CPU time: as long as that takes on a machine that is busy."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def test_a_loop_held_asleep_is_noted_as_asleep_and_logged_as_past_the_goal(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="ferrymq.storage.server.loop_lag"):
        stall = _stall_of(lambda: time.sleep(0.3))
    # then the kernel's account says the loop's thread was neither running nor waiting for a CPU
    assert 0.25 <= stall.held < 1.0
    assert stall.asleep >= 0.25 and stall.on_cpu < 0.1, stall
    # and the stall is a WARNING naming that split, with its figures as fields
    [record] = [r for r in caplog.records if r.name == "ferrymq.storage.server.loop_lag"]
    assert record.levelno == logging.WARNING
    assert "ms asleep" in record.getMessage()
    assert record.__dict__["held_ms"] == round(stall.held * 1000)


def test_a_loop_held_by_its_own_work_is_noted_as_on_a_cpu() -> None:
    stall = _stall_of(lambda: _spin(0.3))
    assert stall.on_cpu >= 0.25 and stall.asleep < 0.1, stall


_STARVED = """
import asyncio, json, os, subprocess, sys, time
from ferrymq.storage.server.loop_lag import LoopLagMonitor

os.sched_setaffinity(0, {0})
# another process, runnable all along, on the same single CPU
rival = subprocess.Popen([sys.executable, "-c", "import os; os.sched_setaffinity(0, {0})\\nwhile True: pass"])
time.sleep(0.2)

async def run():
    monitor = LoopLagMonitor(interval=0.01)
    monitor.start()
    await asyncio.sleep(0.05)
    until = time.perf_counter() + 0.4
    while time.perf_counter() < until:
        pass
    await asyncio.sleep(0.05)
    await monitor.stop()
    return monitor

try:
    monitor = asyncio.run(run())
finally:
    rival.kill()
print(json.dumps([s.as_dict() for s in monitor.stalls]))
"""


def test_a_loop_sharing_its_cpu_with_another_process_is_noted_as_waiting_for_a_cpu() -> None:
    # when the loop's work must share one CPU with a process that is always runnable
    done = subprocess.run([sys.executable, "-c", _STARVED], capture_output=True, text=True, timeout=30, check=True)
    stalls = json.loads(done.stdout)
    # then the stall holding it is noted with a good part of it spent waiting for that CPU, not on it
    worst = max(stalls, key=lambda s: s["held_ms"])
    assert worst["held_ms"] >= 300, stalls
    assert worst["waiting_for_cpu_ms"] >= 100 and worst["on_cpu_ms"] >= 100, stalls


def test_stalls_under_the_noted_length_are_neither_kept_nor_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> LoopLagMonitor:
        monitor = LoopLagMonitor(interval=0.01)
        monitor.start()
        for _ in range(5):
            time.sleep(0.02)
            await asyncio.sleep(0.01)
        await monitor.stop()
        return monitor

    with caplog.at_level(logging.INFO, logger="ferrymq.storage.server.loop_lag"):
        monitor = asyncio.run(run())
    assert NOTED_SECONDS > 0.03
    assert list(monitor.stalls) == []
    assert not [r for r in caplog.records if r.name == "ferrymq.storage.server.loop_lag"]


def test_a_loop_held_on_pages_read_back_from_disk_counts_them(tmp_path: Path) -> None:
    # given a file whose pages are not in memory (dropped from the page cache after it was written and synced)
    path = tmp_path / "cold"
    path.write_bytes(os.urandom(4 * 1024 * 1024))
    with open(path, "rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)

    def touch_every_page() -> None:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            for at in range(0, len(mapped), mmap.PAGESIZE):
                mapped[at]
        time.sleep(0.1)

    # when the loop is held reading them through a mapping, page by page
    stall = _stall_of(touch_every_page)
    # then the pages it slept on are counted
    assert stall.page_faults > 0, stall
