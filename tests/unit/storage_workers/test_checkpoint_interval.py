"""How much log a checkpoint taken while serving waits for (``CheckpointFork.interval``): the configured bytes at
least, the last delta's size at least, and more as the last checkpoint's CPU grows, up to the configured most; or
the configured records at least, more as the last checkpoint's CPU grows (``CheckpointFork.record_interval``),
whichever comes first."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from ferrymq.storage.server.config import WorkerConfig
from ferrymq.storage.server.running_checkpoint import CheckpointFork

MIB = 1024 * 1024


class Log:
    end = 0
    end_offset = 1


def fork(every: int = 32 * MIB, most: int = 128 * MIB, *, cpu: float = 0.0, size: int = 0,
         records: int = 0) -> CheckpointFork:
    checkpoints = CheckpointFork(0, Path("unused"), every, most, every_records=records)
    checkpoints.last_cpu = cpu
    checkpoints.last_size = size
    return checkpoints


@pytest.mark.parametrize(
    ("cpu", "size", "interval"),
    [
        (0.0, 0, 32 * MIB),  # none taken yet
        (0.1, 0, 32 * MIB),  # a million messages: 0.1 s is worth 25.6 MiB, under the least
        (0.25, 0, 64 * MIB),  # 0.25 s of CPU waits for 64 MiB of log
        (0.8, 0, 128 * MIB),  # ten million messages: capped at the most
        (0.25, 200 * MIB, 200 * MIB),  # a delta larger than all that: deltas never write more than the log
    ],
)
def test_the_interval_is_the_least_the_cost_and_the_last_size_whichever_is_more(
    cpu: float, size: int, interval: int
) -> None:
    assert fork(cpu=cpu, size=size).interval() == interval


def test_a_most_at_or_under_the_least_keeps_the_interval_fixed() -> None:
    assert fork(most=0, cpu=100.0).interval() == 32 * MIB
    assert fork(most=16 * MIB, cpu=100.0).interval() == 32 * MIB


def test_due_once_the_interval_of_log_is_appended_since_the_last() -> None:
    checkpoints = fork(every=100, most=1_000, cpu=2e-6)  # 2 µs of CPU: 536 bytes of log
    log = Log()
    wal = cast(Any, log)
    assert not checkpoints.due(wal)  # the first look only notes where the log stands
    log.end = 535
    assert not checkpoints.due(wal)
    log.end = 537
    assert checkpoints.due(wal)
    assert not checkpoints.due(cast(Any, Log()))  # another log (a rebuild) starts counting again


@pytest.mark.parametrize(
    ("cpu", "interval"),
    [
        (0.0, 8192),  # none taken yet
        (0.05, 8192),  # a million messages: 0.05 s replays 1,250 records, under the least
        (0.33, 8250),  # ten million messages: as many records as take 0.33 s to replay
        (4.0, 100_000),  # a state twelve times that: no cap, the replay stays about one checkpoint long
    ],
)
def test_the_record_interval_is_the_least_or_what_replays_as_long_as_the_last_checkpoint_took(
    cpu: float, interval: int
) -> None:
    assert fork(cpu=cpu, records=8192).record_interval() == interval


def test_due_once_the_records_since_the_last_would_replay_too_long_whatever_their_bytes() -> None:
    checkpoints = fork(every=1_000, most=1_000, records=100)
    log = Log()
    wal = cast(Any, log)
    assert not checkpoints.due(wal)
    log.end, log.end_offset = 999, 100  # 99 records of ten bytes: neither interval reached
    assert not checkpoints.due(wal)
    log.end_offset = 101
    assert checkpoints.due(wal)
    # and bytes alone still make it due, with a single record
    only_bytes = fork(every=1_000, most=1_000, records=100)
    log = Log()
    wal = cast(Any, log)
    assert not only_bytes.due(wal)
    log.end, log.end_offset = 1_000, 2
    assert only_bytes.due(wal)


def test_records_count_for_nothing_when_their_interval_is_zero_and_nothing_is_due_without_bytes() -> None:
    log = Log()
    wal = cast(Any, log)
    only_bytes = fork(every=1_000, most=1_000, records=0)
    assert not only_bytes.due(wal)
    log.end_offset = 10**9
    assert not only_bytes.due(wal)
    # no checkpoints while serving at all: records do not bring them back
    never = fork(every=0, most=0, records=1)
    assert not never.due(wal)
    log.end_offset += 10
    assert not never.due(wal)


def test_settings_that_are_negative_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="FERRYMQ_WORKER_CHECKPOINT_MAX_BYTES"):
        WorkerConfig(data_dir=tmp_path, checkpoint_max_bytes=-1)
    with pytest.raises(ValueError, match="FERRYMQ_WORKER_CHECKPOINT_BYTES"):
        WorkerConfig(data_dir=tmp_path, checkpoint_bytes=-1)
    with pytest.raises(ValueError, match="FERRYMQ_WORKER_CHECKPOINT_RECORDS"):
        WorkerConfig(data_dir=tmp_path, checkpoint_records=-1)


def test_enough_log_is_not_due_until_the_last_checkpoint_s_cpu_is_its_share_of_the_time_since_it_started() -> None:
    now = [100.0]
    checkpoints = CheckpointFork(0, Path("unused"), 1_000, 1_000, clock=lambda: now[0])
    checkpoints.last_cpu = 0.3  # a fifth of a core: 1.5 s
    checkpoints._started = 100.0
    log = Log()
    wal = cast(Any, log)
    assert not checkpoints.due(wal)
    log.end = 1_000
    now[0] = 101.0
    assert checkpoints.retry_in() == pytest.approx(0.5)
    assert not checkpoints.due(wal)  # no loop to wait on and none asked to: it is only not due
    now[0] = 101.5
    assert checkpoints.retry_in() == 0.0
    assert checkpoints.due(wal)
    # none taken yet: nothing to wait for
    assert CheckpointFork(0, Path("unused"), 1_000).retry_in() == 0.0
