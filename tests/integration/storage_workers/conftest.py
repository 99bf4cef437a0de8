"""Start real storage worker processes (``python -m storage_workers``) on loopback, and always stop them."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from ferrymq.settings import Settings

REPO = Path(__file__).resolve().parents[3]


@dataclass
class WorkerProcess:
    proc: subprocess.Popen
    host: str
    port: int
    log_path: Path

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self, timeout: float = 15) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stderr(self) -> str:
        return self.log_path.read_text(errors="replace")


def worker_env(settings: Settings) -> dict[str, str]:
    """The parent's environment (AWS endpoint and credentials from ``aws_settings``) plus the FerryMQ settings."""
    return {
        **os.environ,
        "FERRYMQ_TABLE_PREFIX": settings.table_prefix,
        "FERRYMQ_REGION": settings.region,
        "FERRYMQ_DATA_DIR": str(settings.data_dir),
        "PYTHONUNBUFFERED": "1",
    }


def _read_ready_line(proc: subprocess.Popen, timeout: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    fd = proc.stdout.fileno()
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the worker did not report ready in time")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the worker exited with {proc.wait()} before it was ready")
            buf += chunk
    return buf.split(b"\n", 1)[0].decode()


@pytest.fixture
def start_worker(aws_settings: Settings, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(
        data_dir: Path,
        *,
        worker_id: str = "worker-it",
        partition: int = 0,
        port: int = 0,
        extra_args: Sequence[str] = (),
    ) -> WorkerProcess:
        log_path = tmp_path / f"{worker_id}-{len(started)}.stderr"
        with open(log_path, "wb") as err:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "storage_workers",
                    "--data-dir",
                    str(data_dir),
                    "--worker-id",
                    worker_id,
                    "--partition",
                    str(partition),
                    "--port",
                    str(port),
                    *extra_args,
                ],
                cwd=REPO,
                env=worker_env(aws_settings),
                stdout=subprocess.PIPE,
                stderr=err,
            )
        worker = WorkerProcess(proc, "", 0, log_path)
        started.append(worker)
        try:
            line = _read_ready_line(proc, 30)
        except Exception as exc:
            raise AssertionError(f"{exc}\n--- worker stderr ---\n{worker.stderr()}") from None
        word, host, port_text = line.split()
        assert word == "FERRYMQ_WORKER_READY"
        worker.host, worker.port = host, int(port_text)
        return worker

    try:
        yield start
    finally:
        for worker in started:
            if worker.proc.poll() is None:
                worker.proc.kill()
                worker.proc.wait(10)
            if worker.proc.stdout is not None:
                worker.proc.stdout.close()
