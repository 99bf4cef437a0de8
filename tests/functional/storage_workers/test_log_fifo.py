"""The records of FIFO queues, dead-letter redrive and move tasks on real log files: recovery, rolling and
compaction give back the state the live engine had."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.log.compaction import Compactor, compact_segments
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.segments import list_segments
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.server import fold
from tests.support.engine_workload import RETENTION, drive
from tests.support.log_engine import appending, new_engine


def recovered(directory: Path, clock: ManualClock) -> Engine:
    engine = new_engine(clock)
    recover(directory, engine.apply)
    return engine


async def drive_on_log(directory: Path, seed: int, steps: int, **writer_args: object) -> tuple[Engine, ManualClock]:
    clock = ManualClock()
    writer = LogWriter(directory, **writer_args)  # type: ignore[arg-type]
    engine = new_engine(clock, on_record=appending(writer))
    rng = random.Random(seed)
    for _ in range(steps // 50):
        drive(engine, clock, rng, 50)
        await asyncio.sleep(0)
    await writer.close()
    return engine, clock


@pytest.mark.parametrize("seed", [31, 32])
def test_a_log_of_the_new_records_recovers_the_same_state(tmp_path: Path, seed: int) -> None:
    # given a log written by an engine driven through FIFO queues, redrive and move tasks, over many segments
    engine, clock = asyncio.run(drive_on_log(tmp_path, seed, 2000, segment_bytes=16 * 1024, max_batch=32))
    assert len(list_segments(tmp_path)) > 3
    # when it is recovered, then messages, queue types, resend windows, attempts and tasks are all back
    again = recovered(tmp_path, clock)
    assert again.state() == engine.state()
    assert again.meta_state() == engine.meta_state()
    assert again.active_move_tasks() == engine.active_move_tasks()


def test_compacting_a_log_of_the_new_records_keeps_the_state(tmp_path: Path) -> None:
    # given such a log, its sealed segments compacted into one base segment
    engine, clock = asyncio.run(drive_on_log(tmp_path, 33, 2000, segment_bytes=16 * 1024, max_batch=32))
    sealed = list_segments(tmp_path)[:-1]
    compact_segments(tmp_path, sealed, fold)
    # when it is recovered, then it is the same state
    again = recovered(tmp_path, clock)
    assert list_segments(tmp_path)[0] == sealed[-1]
    assert again.state() == engine.state()
    assert again.meta_state() == engine.meta_state()


def test_compaction_running_under_traffic_keeps_the_state(tmp_path: Path) -> None:
    async def scenario() -> tuple[Engine, ManualClock, int]:
        clock = ManualClock()
        writer = LogWriter(tmp_path, segment_bytes=8 * 1024, max_batch=16)
        engine = new_engine(clock, on_record=appending(writer))
        compactor = Compactor(writer, fold, lambda: engine.live_bytes, min_bytes=32 * 1024, ratio=2)
        writer.on_commit = compactor.check
        rng = random.Random(34)
        for _ in range(80):
            drive(engine, clock, rng, 50)
            await writer.flush()
        await asyncio.sleep(0.2)
        await compactor.close()
        await writer.close()
        engine.on_record = None
        return engine, clock, compactor.runs

    engine, clock, runs = asyncio.run(scenario())
    assert runs >= 1
    again = recovered(tmp_path, clock)
    assert again.state() == engine.state()
    assert again.meta_state() == engine.meta_state()
    assert again.poll("f-a.fifo", 10, 30, RETENTION, attempt_id="att-1") == engine.poll(
        "f-a.fifo", 10, 30, RETENTION, attempt_id="att-1"
    )
