"""The log's segment size and compaction thresholds, read from the environment into a worker's configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferrymq.settings import Settings
from ferrymq.storage.server.config import WorkerConfig


def test_segment_and_compaction_settings_reach_the_worker_configuration(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "FERRYMQ_WORKER_SEGMENT_BYTES": "262144",
            "FERRYMQ_WORKER_COMPACT_MIN_BYTES": "1048576",
            "FERRYMQ_WORKER_COMPACT_RATIO": "2.5",
        }
    )
    config = WorkerConfig.from_settings(settings, data_dir=tmp_path)
    assert (config.segment_bytes, config.compact_min_bytes, config.compact_ratio) == (262144, 1048576, 2.5)
    # a command-line value still wins over the environment's
    assert WorkerConfig.from_settings(settings, data_dir=tmp_path, segment_bytes=4096).segment_bytes == 4096


def test_the_defaults_are_the_documented_ones(tmp_path: Path) -> None:
    config = WorkerConfig.from_settings(Settings.from_env({}), data_dir=tmp_path)
    assert (config.segment_bytes, config.compact_min_bytes, config.compact_ratio) == (64 << 20, 128 << 20, 4.0)


@pytest.mark.parametrize(
    "env",
    [
        {"FERRYMQ_WORKER_SEGMENT_BYTES": "0"},
        {"FERRYMQ_WORKER_COMPACT_MIN_BYTES": "-1"},
        {"FERRYMQ_WORKER_COMPACT_RATIO": "0"},
        {"FERRYMQ_WORKER_COMPACT_RATIO": "nan"},
    ],
)
def test_values_that_would_roll_or_compact_without_end_are_refused(tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="FERRYMQ_WORKER_"):
        WorkerConfig.from_settings(Settings.from_env(env), data_dir=tmp_path)


def test_the_sync_on_loop_limit_reaches_the_worker_and_defaults_to_ten_ms(tmp_path: Path) -> None:
    settings = Settings.from_env({"FERRYMQ_WORKER_SYNC_ON_LOOP_MS": "0.5"})
    assert WorkerConfig.from_settings(settings, data_dir=tmp_path).sync_on_loop_ms == 0.5
    assert WorkerConfig.from_settings(Settings.from_env({}), data_dir=tmp_path).sync_on_loop_ms == 10.0
    # 0 keeps every sync in the log's I/O thread
    assert WorkerConfig.from_settings(
        Settings.from_env({"FERRYMQ_WORKER_SYNC_ON_LOOP_MS": "0"}), data_dir=tmp_path
    ).sync_on_loop_ms == 0


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "-inf"])
def test_a_sync_on_loop_limit_that_is_not_a_number_of_ms_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(ValueError, match="FERRYMQ_WORKER_SYNC_ON_LOOP_MS"):
        WorkerConfig.from_settings(Settings.from_env({"FERRYMQ_WORKER_SYNC_ON_LOOP_MS": value}), data_dir=tmp_path)


def test_a_sync_on_loop_limit_that_is_not_a_number_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="FERRYMQ_WORKER_SYNC_ON_LOOP_MS"):
        Settings.from_env({"FERRYMQ_WORKER_SYNC_ON_LOOP_MS": "fast"})


def test_the_sync_calm_period_reaches_the_worker_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    settings = Settings.from_env({"FERRYMQ_WORKER_SYNC_CALM_SECONDS": "2.5"})
    assert WorkerConfig.from_settings(settings, data_dir=tmp_path).sync_calm_seconds == 2.5
    assert WorkerConfig.from_settings(Settings.from_env({}), data_dir=tmp_path).sync_calm_seconds == 10.0
    for value in ("-1", "nan", "inf"):
        with pytest.raises(ValueError, match="FERRYMQ_WORKER_SYNC_CALM_SECONDS"):
            WorkerConfig.from_settings(
                Settings.from_env({"FERRYMQ_WORKER_SYNC_CALM_SECONDS": value}), data_dir=tmp_path
            )
