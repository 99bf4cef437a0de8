"""Real storage worker processes (``python -m ferrymq.storage``) on loopback for integration tests, always stopped."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from ferrymq.aws.replica_sets import ReplicaSets
from ferrymq.settings import Settings
from tests.support.processes import kill_group

REPO = Path(__file__).resolve().parents[2]

# Stands in for `ferrymq up`: runs the worker as its own child, passing its pid as --parent-pid.
_PARENT = (
    "import os, subprocess, sys; sys.exit(subprocess.call("
    "[sys.executable, '-m', 'ferrymq.storage', *sys.argv[1:], '--parent-pid', str(os.getpid())]))"
)


@dataclass
class WorkerProcess:
    proc: subprocess.Popen
    """The worker, or with ``behind_parent`` the parent that runs it."""
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


def _retire_foreign_replica_sets(settings: Settings, partitions: Sequence[int], worker_id: str) -> None:
    """Forget the replica sets of ``partitions`` that another test's worker holds (the table outlives tests):
    a worker never takes a partition from the replica set it finds, it stands by, so a test that starts a
    worker for a partition an earlier test used starts from a partition nobody holds, as an operator
    retiring that cluster would leave it.  The epoch and the receipt key stay."""
    from ferrymq.aws import session

    dynamodb = session.client("dynamodb", settings)
    for partition in partitions:
        item = dynamodb.get_item(
            TableName=settings.partitions_table, Key={"partition": {"N": str(partition)}}, ConsistentRead=True
        ).get("Item")
        replicas = [v["S"] for v in item.get("replicas", {}).get("L", [])] if item else []
        if replicas and worker_id not in replicas:
            dynamodb.update_item(
                TableName=settings.partitions_table,
                Key={"partition": {"N": str(partition)}},
                UpdateExpression="REMOVE replicas, leader, isr, lease_until, #c, acks",
                ExpressionAttributeNames={"#c": "cluster"},
            )


@pytest.fixture
def start_worker(aws_settings: Settings, tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []
    sessions: list[subprocess.Popen] = []

    def start(
        data_dir: Path,
        *,
        worker_id: str = "worker-it",
        partition: int = 0,
        partitions: Sequence[int] | None = None,
        port: int = 0,
        extra_args: Sequence[str] = (),
        behind_parent: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> WorkerProcess:
        """Start a worker (``env``: settings added to its environment); with ``behind_parent`` as the child of a
        parent process of its own session, so that the parent can die alone and the worker, orphaned, still
        goes with the session at the end."""
        log_path = tmp_path / f"{worker_id}-{len(started)}.stderr"
        held = partitions if partitions is not None else (partition,)
        if "--no-register" not in extra_args:
            _retire_foreign_replica_sets(aws_settings, held, worker_id)
        command = [sys.executable, "-c", _PARENT] if behind_parent else [sys.executable, "-m", "ferrymq.storage"]
        with open(log_path, "wb") as err:
            proc = subprocess.Popen(
                [
                    *command,
                    "--data-dir",
                    str(data_dir),
                    "--worker-id",
                    worker_id,
                    "--partitions",
                    ",".join(str(p) for p in held),
                    "--port",
                    str(port),
                    *extra_args,
                ],
                cwd=REPO,
                env={**worker_env(aws_settings), **(env or {})},
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=behind_parent,
            )
        worker = WorkerProcess(proc, "", 0, log_path)
        started.append(worker)
        if behind_parent:
            sessions.append(proc)
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
        for proc in sessions:
            kill_group(proc)
        for worker in started:
            if worker.proc.poll() is None:
                worker.proc.kill()
                worker.proc.wait(10)
            if worker.proc.stdout is not None:
                worker.proc.stdout.close()


@pytest.fixture
def partition() -> int:
    """A partition number no other test uses, in a table other tests share."""
    return 1_000_000 + uuid.uuid4().int % 1_000_000_000


@pytest.fixture
def sets(aws_settings: Settings) -> ReplicaSets:
    return ReplicaSets.from_settings(aws_settings)
