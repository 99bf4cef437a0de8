"""Priority levels on real log files (``docs/design/priorities.md``): recovery and compaction, which swaps bodies
and attributes for references on disk while it folds, give back every message's level and the scheduler's
credits, and the recovered engine picks what the live one would."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import CREDITS
from ferrymq.storage.log.compaction import compact_segments
from ferrymq.storage.log.format import ENGINE_FLAGS
from ferrymq.storage.log.reading import SealedSegments, decode
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.segments import list_segments, segment_path
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.server import fold
from tests.support.log_engine import appending, new_engine
from tests.support.priority_workload import RETENTION, drive_priorities, leveled_message, same_picks


def recovered(directory: Path, clock: ManualClock) -> Engine:
    engine = new_engine(clock)
    recover(directory, engine.apply)
    return engine


async def drive_on_log(
    directory: Path, seed: int, steps: int, then: Callable[[Engine], None] | None = None
) -> tuple[Engine, ManualClock]:
    clock = ManualClock()
    writer = LogWriter(directory, segment_bytes=16 * 1024, max_batch=32)
    engine = new_engine(clock, on_record=appending(writer))
    rng = random.Random(seed)
    for _ in range(steps // 50):
        drive_priorities(engine, clock, rng, 50)
        await asyncio.sleep(0)
    if then is not None:
        then(engine)
    await writer.close()
    engine.on_record = None
    return engine, clock


def leave_credits_then_fill(engine: Engine) -> None:
    """A receive over two levels that leaves credits, then other traffic enough to seal its segment."""
    engine.send("pa", [leveled_message(f"low-{i}") for i in range(5)] + [leveled_message(f"high-{i}", 3)
                                                                       for i in range(5)], RETENTION)
    engine.poll("pa", 3, 30, RETENTION, priority_levels=4)
    assert engine.partition.credits_state()["pa"]
    for i in range(40):
        engine.send("filler", [leveled_message(f"{i}" * 1000)], RETENTION)


def test_a_recovered_log_keeps_levels_and_credits(tmp_path: Path) -> None:
    # given a log written by an engine serving several priority levels, over many segments
    engine, clock = asyncio.run(drive_on_log(tmp_path, 51, 2000))
    assert len(list_segments(tmp_path)) > 3
    # when it is recovered, then messages (levels included) and credits are back, and it picks the same
    again = recovered(tmp_path, clock)
    assert again.state() == engine.state()
    assert again.partition.credits_state() == engine.partition.credits_state()
    same_picks(again, engine)


def test_a_compacted_log_keeps_levels_and_credits(tmp_path: Path) -> None:
    # given such a log with credits in use at the end, its sealed segments compacted into one base segment
    engine, clock = asyncio.run(drive_on_log(tmp_path, 52, 2000, leave_credits_then_fill))
    sealed = list_segments(tmp_path)[:-1]
    base = compact_segments(tmp_path, sealed, fold)
    in_base = [decode(frame, segment_path(tmp_path, index))
               for index, frame in SealedSegments(tmp_path, [base.index]) if frame.flags in ENGINE_FLAGS]
    assert (CREDITS, "pa", engine.partition.credits_state()["pa"]) in in_base
    # when it is recovered, then it is the same state and it picks the same
    again = recovered(tmp_path, clock)
    assert again.state() == engine.state()
    assert again.partition.credits_state() == engine.partition.credits_state()
    same_picks(again, engine)
