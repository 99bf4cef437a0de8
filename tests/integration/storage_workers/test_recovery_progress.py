"""A worker process recovering a large log logs its progress on stderr, as JSON lines, before it is ready."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ferrymq.storage.server.layout import replica_dir
from tests.functional.storage_workers.test_recovery_progress import many_records
from tests.integration.conftest import WorkerProcess


def test_a_worker_logs_recovery_progress_of_a_large_log(
    start_worker: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    # given a worker's data directory whose partition log holds 25,000 records (over 4 MiB)
    data_dir = tmp_path / "workers" / "worker-recovering"
    records = many_records(replica_dir(data_dir, 961), batches=100, per_batch=250)
    # when the worker process starts on it
    worker = start_worker(data_dir, worker_id="worker-recovering", partition=961, extra_args=["--no-register"])
    try:
        lines = [json.loads(line) for line in worker.stderr().splitlines() if line.startswith("{")]
    finally:
        worker.terminate()
    progress = [line for line in lines if line["logger"] == "ferrymq.storage.log.recovery_progress"]
    # then, by the time it is ready, it has told each tenth of the log's bytes and then the totals and the time
    steps = [line for line in progress if "%" in line["message"]]
    assert len(steps) >= 9, progress
    assert all(line["component"] == "worker" and line["level"] == "INFO" for line in progress)
    assert [s["bytes_done"] for s in steps] == sorted(s["bytes_done"] for s in steps)
    end = progress[-1]
    assert end["message"].startswith(f"recovered {replica_dir(data_dir, 961)}: {records} records")
    assert end["records_done"] == records and end["seconds"] >= 0
