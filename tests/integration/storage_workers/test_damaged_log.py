"""A damaged log on a real worker's data directory: the worker refuses to start naming the damage, and
``ferrymq log salvage`` (the installed command) cuts it, after which the worker serves what was kept."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ferrymq.rpc.client import WorkerClient
from ferrymq.settings import Settings
from ferrymq.storage.engine.records import SENT
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.format import FRAME_OVERHEAD, HEADER_SIZE
from ferrymq.storage.log.segments import segment_path
from ferrymq.storage.log.writer import LogWriter
from tests.functional.storage_workers.worker_calls import drain
from tests.integration.conftest import REPO, WorkerProcess, worker_env

FERRYMQ = Path(sys.executable).parent / "ferrymq"
BODIES = ["one", "two", "three"]


def sent(seq: int, body: str, ts: int) -> tuple:
    return (SENT, "q", ts, seq, [[f"id-{seq}", body, {}, "md5", None, 0, {}]])


def damaged_log(directory: Path) -> tuple[Path, int, int]:
    """A log of three acknowledged messages whose second record is damaged; returns the segment and the
    damaged range's start and end."""
    now = int(time.time() * 1000)  # recent, so that the messages are within their retention when received
    records = [sent(i, body, now) for i, body in enumerate(BODIES, start=1)]

    async def write() -> None:
        directory.mkdir(parents=True)
        writer = LogWriter(directory)
        for record in records:
            writer.append(record, 0)
            await writer.flush()  # each record a batch of its own, synced, and so acknowledged
        await writer.close()

    asyncio.run(write())
    path = segment_path(directory, 1)
    # each batch: one record frame, then its commit frame
    commit = FRAME_OVERHEAD + 8
    start = HEADER_SIZE + FRAME_OVERHEAD + len(codec.encode(records[0])) + commit
    end = start + FRAME_OVERHEAD + len(codec.encode(records[1]))
    data = bytearray(path.read_bytes())
    data[start + 12] ^= 0xFF
    path.write_bytes(bytes(data))
    return path, start, end


def ferrymq_log(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FERRYMQ), "log", *args], cwd=REPO, capture_output=True, text=True, timeout=120, env=dict(os.environ)
    )


def test_a_worker_on_a_damaged_log_exits_naming_the_segment_and_offset(
    aws_settings: Settings, tmp_path: Path
) -> None:
    # given a worker's data directory whose log has a damaged record before intact ones
    directory = tmp_path / "workers" / "worker-damaged"
    path, start, end = damaged_log(directory)
    before = path.read_bytes()
    # when the worker process starts on it
    proc = subprocess.Popen(
        [sys.executable, "-m", "ferrymq.storage", "--data-dir", str(directory), "--worker-id", "worker-damaged",
         "--partition", "951", "--port", "0", "--no-register"],
        cwd=REPO,
        env=worker_env(aws_settings),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # then it exits with an error that names the segment (moved into the partition's log directory), the
    # offset and the damaged range
    moved = directory / "p951" / path.name
    assert proc.returncode != 0, err
    assert "FERRYMQ_WORKER_READY" not in out
    assert "storage worker could not start" in err
    assert f"{moved}: damaged frame at byte {start}: bytes {start}..{end}" in err
    # and it cut nothing
    assert moved.read_bytes() == before


def test_log_salvage_reports_cuts_and_then_the_worker_serves_the_records_after_the_damage(
    start_worker: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    # given a worker's data directory whose log has a damaged record before intact ones
    directory = tmp_path / "workers" / "worker-salvaged"
    path, start, end = damaged_log(directory)
    damaged = path.read_bytes()
    # when a dry run looks at it, then it reports the range and changes nothing
    preview = ferrymq_log("salvage", "--data-dir", str(directory), "--dry-run", "--json")
    assert preview.returncode == 0, preview.stderr
    report = json.loads(preview.stdout)
    assert report["dry_run"] is True
    assert report["segments"][0]["cut"] == [{"offset": start, "length": end - start}]
    assert report["records_kept"] == 2
    assert path.read_bytes() == damaged
    # and when salvage runs, it prints what it cut
    salvaged = ferrymq_log("salvage", "--data-dir", str(directory))
    assert salvaged.returncode == 0, salvaged.stderr
    assert f"{path.name}: cut {end - start} damaged bytes at byte {start}" in salvaged.stdout
    # and a worker then starts on the directory and serves the messages before and after the damage
    worker = start_worker(directory, worker_id="worker-salvaged", partition=952, extra_args=["--no-register"])

    async def received() -> list[str]:
        client = WorkerClient(worker.host, worker.port)
        try:
            return [m["body"] for m in await drain(client, "q", partition=952)]
        finally:
            await client.close()

    assert asyncio.run(received()) == ["one", "three"]
    # and while that worker holds the partition's log directory (the segments moved there), salvage refuses to
    # touch it
    refused = ferrymq_log("salvage", "--data-dir", str(directory / "p952"))
    assert refused.returncode == 1
    assert "in use" in refused.stderr
    assert worker.terminate() == 0
