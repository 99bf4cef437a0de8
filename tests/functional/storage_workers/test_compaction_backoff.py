"""Compaction that fails (a full disk, a bug in the fold) backs off instead of retrying on every commit."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from ferrymq.clock import ManualClock
from ferrymq.storage.engine.fold import Removals
from ferrymq.storage.engine.records import SENT, Record
from ferrymq.storage.log.compaction import Compactor
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.writer import LogWriter
from tests.support.log_engine import replayed

LOGGER = "ferrymq.storage.log.compaction"


def sent(seq: int) -> tuple:
    return (SENT, "q", 1_700_000_000_000, seq, [[f"id-{seq}", "b" * 100, {}, "md5", None, 0, {}]])


class FlakyFold:
    """A fold that raises the given errors, one per attempt, then folds for real."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self, records: Iterator[Record], _removals: Removals) -> Iterable[Record]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return replayed(records).snapshot()


def disk_full() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


async def sealed_log(directory: Path) -> LogWriter:
    """A writer whose log has several sealed segments, all worth compacting."""
    writer = LogWriter(directory, segment_bytes=512)
    for seq in range(1, 20):
        writer.append(sent(seq), 0)
        await writer.flush()
    assert len(writer.sealed_segments()) >= 2
    return writer


async def settle(compactor: Compactor) -> None:
    while compactor.running:
        await asyncio.sleep(0.001)


def test_attempts_after_a_failure_are_spaced_by_a_doubling_backoff_up_to_its_cap(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[float], FlakyFold]:
        # given a log worth compacting and a disk that stays full for twelve attempts
        writer = await sealed_log(tmp_path)
        clock = ManualClock(start=0)
        fold = FlakyFold([disk_full() for _ in range(12)])
        compactor = Compactor(writer, fold, lambda: 0, min_bytes=1, ratio=1, clock=clock)
        waits: list[float] = []
        for attempt in range(1, 13):
            # when commits keep asking for compaction
            compactor.check()
            await settle(compactor)
            assert fold.calls == attempt
            assert compactor.next_attempt is not None
            wait = compactor.next_attempt - clock.monotonic()
            waits.append(wait)
            # then nothing is tried again until the wait is over
            clock.advance(wait - 0.5)
            for _ in range(3):
                compactor.check()
                assert not compactor.running
            assert fold.calls == attempt
            clock.advance(0.5)
        await compactor.close()
        await writer.close()
        return waits, fold

    waits, fold = asyncio.run(scenario())
    assert waits == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
    assert fold.calls == 12


def test_a_failure_is_reported_once_and_compaction_resumes_after_the_backoff(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    written = list(range(1, 20))
    attempted_at: list[float] = []

    async def scenario() -> tuple[Compactor, LogWriter, list[dict[str, object]]]:
        # given a log worth compacting on a disk that is full for three attempts
        writer = await sealed_log(tmp_path)
        clock = ManualClock(start=0)
        fold = FlakyFold([disk_full(), disk_full(), disk_full()])
        compactor = Compactor(writer, fold, lambda: 0, min_bytes=1, ratio=1, clock=clock)
        statuses = []
        # when compaction is asked for after every commit while the clock moves on
        for seq in range(20, 60):
            writer.append(sent(seq), 0)
            await writer.flush()  # the worker keeps serving: appends stay durable meanwhile
            written.append(seq)
            compactor.check()
            if compactor.running:
                attempted_at.append(clock.monotonic())
            await settle(compactor)
            if compactor.failures and len(statuses) < compactor.failures:
                statuses.append(compactor.status())
            if compactor.runs:
                break
            clock.advance(0.5)
        await compactor.close()
        await writer.close()
        return compactor, writer, statuses

    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        compactor, writer, statuses = asyncio.run(scenario())
    # then it ran four times: three failures, 1 s, 2 s and 4 s apart, then the compaction that worked
    assert attempted_at == [0, 1, 3, 7]
    assert compactor.attempts == 4 and compactor.runs == 1
    assert writer.failed is None
    # and the failure was reported once at ERROR with its cause and no traceback, the retries at DEBUG
    records = [r for r in caplog.records if r.name == LOGGER]
    errors = [r for r in records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "No space left on device" in errors[0].getMessage()
    assert errors[0].exc_info is None
    assert len([r for r in records if r.levelno == logging.DEBUG and "failed again" in r.getMessage()]) == 2
    # and its success after the streak was logged, and the state went back to normal
    assert any("works again after 3 failed attempt(s)" in r.getMessage() for r in records)
    assert (compactor.failures, compactor.last_error, compactor.next_attempt) == (0, None, None)
    assert compactor.status()["failures"] == 0
    # while it failed, its state was there for the worker to report
    assert [(s["failures"], s["retry_in_seconds"]) for s in statuses] == [(1, 1.0), (2, 2.0), (3, 4.0)]
    assert all(s["last_error"] == "OSError: [Errno 28] No space left on device" for s in statuses)
    # and the log compacted then still holds every record written
    got: list[tuple] = []
    recover(tmp_path, got.append)
    assert replayed(got).state() == replayed(sent(seq) for seq in written).state()


def test_a_new_cause_is_reported_again_with_its_traceback_when_it_is_not_an_os_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> Compactor:
        # given compaction failing on a full disk, then on a bug in the fold
        writer = await sealed_log(tmp_path)
        clock = ManualClock(start=0)
        fold = FlakyFold([disk_full(), disk_full(), ValueError("fold bug")])
        compactor = Compactor(writer, fold, lambda: 0, min_bytes=1, ratio=1, clock=clock)
        for _ in range(3):
            compactor.check()
            await settle(compactor)
            clock.advance(compactor.first_retry * 2 ** (compactor.failures - 1))
        await compactor.close()
        await writer.close()
        return compactor

    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        compactor = asyncio.run(scenario())
    # then each cause got one ERROR; the bug's comes with its traceback
    errors = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.ERROR]
    assert [r.exc_info is not None for r in errors] == [False, True]
    assert "ValueError: fold bug" in errors[1].getMessage()
    assert compactor.failures == 3 and compactor.last_error == "ValueError: fold bug"
