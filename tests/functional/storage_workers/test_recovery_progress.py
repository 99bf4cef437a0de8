"""Recovery of a log with many records says how far it has got, and what it took at the end."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from ferrymq.storage.engine.records import SENT
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.recovery_progress import RecoveryProgress
from tests.support.log_files import write_batches

PROGRESS_LOGGER = "ferrymq.storage.log.recovery_progress"


def many_records(directory: Path, batches: int = 40, per_batch: int = 250) -> int:
    """A log of ``batches`` synced batches of ``per_batch`` one-message records; returns the record count."""
    now = int(time.time() * 1000)
    write_batches(directory, [
        [(SENT, "q", now, b * per_batch + i, [[f"id-{b}-{i}", "x" * 200, {}, "md5", None, 0, {}]])
         for i in range(per_batch)]
        for b in range(batches)
    ])
    return batches * per_batch


def test_a_large_log_reports_every_tenth_of_its_bytes_then_the_total(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # given a log of 10,000 records, counted large enough to report by steps
    records = many_records(tmp_path / "log")
    progress = RecoveryProgress("p0", step_min_bytes=1, interval=3600.0)
    # when it is recovered
    replayed: list[object] = []
    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        recover(tmp_path / "log", replayed.append, progress)
    lines = [r for r in caplog.records if r.name == PROGRESS_LOGGER]
    # then it announced the work, reported at each tenth with growing figures, and ended with the totals
    assert lines[0].getMessage().startswith("recovering p0: 1 segments")
    steps = [r for r in lines[1:-1]]
    assert len(steps) >= 9
    done = [r.bytes_done for r in steps]  # type: ignore[attr-defined]
    assert done == sorted(done) and done[-1] <= steps[-1].bytes_total  # type: ignore[attr-defined]
    assert "%" in steps[0].getMessage()
    end = lines[-1]
    assert end.getMessage().startswith(f"recovered p0: {records} records from 1 segments")
    assert end.records_done == records == len(replayed)  # type: ignore[attr-defined]


def test_a_small_log_reports_by_time_only(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # given a log under the step threshold, and a clock that moves 1 s per reading
    records = many_records(tmp_path / "log", batches=5, per_batch=10)
    ticks = iter(range(1_000_000))
    progress = RecoveryProgress("p1", interval=2.0, clock=lambda: float(next(ticks)))
    with caplog.at_level(logging.INFO, logger=PROGRESS_LOGGER):
        recover(tmp_path / "log", lambda _: None, progress)
    messages = [r.getMessage() for r in caplog.records if r.name == PROGRESS_LOGGER]
    # then it reported every two seconds of that clock, not by steps, and ended with the totals
    assert messages[0].startswith("recovering p1: ")
    assert sum(m.startswith("recovering p1: ") for m in messages) == progress.lines < 5
    assert messages[-1].startswith(f"recovered p1: {records} records")
