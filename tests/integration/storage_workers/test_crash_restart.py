"""A worker process killed (SIGKILL) while serving starts again from the checkpoint it took while serving, not from
its whole log, and answers with every message it acknowledged."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path

from ferrymq.rpc.client import WorkerClient
from tests.integration.conftest import WorkerProcess
from tests.integration.storage_workers.test_worker_process import RETENTION, send_rounds

EVERY_64_KIB = {"FERRYMQ_WORKER_CHECKPOINT_BYTES": str(64 * 1024), "FERRYMQ_WORKER_CHECKPOINT_MAX_BYTES": "0"}
TAKEN = re.compile(r"checkpoint as of offset (\d+) written while serving")
STARTED_FROM = re.compile(r"starting from the checkpoint as of offset (\d+)")


def test_a_worker_killed_while_serving_starts_from_its_last_checkpoint_and_loses_nothing(
    start_worker: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    worker = start_worker(tmp_path / "w", extra_args=["--no-register"], env=EVERY_64_KIB)
    sent = asyncio.run(send_rounds(worker, 60))
    deadline = time.monotonic() + 20
    while not TAKEN.search(worker.stderr()):
        assert time.monotonic() < deadline, worker.stderr()[-3000:]
        time.sleep(0.1)
    taken = max(int(n) for n in TAKEN.findall(worker.stderr()))
    worker.kill9()

    again = start_worker(tmp_path / "w", extra_args=["--no-register"], env=EVERY_64_KIB)
    started = STARTED_FROM.search(again.stderr())
    assert started is not None and int(started.group(1)) >= taken, again.stderr()[-3000:]

    async def drain() -> list[str]:
        client = WorkerClient(again.host, again.port)
        bodies: list[str] = []
        try:
            while True:
                got = await client.receive(
                    0, "q", max_messages=10, visibility_timeout=300, wait_seconds=0, retention_seconds=RETENTION
                )
                if not got:
                    return bodies
                bodies += [m["body"] for m in got]
        finally:
            await client.close()

    assert sorted(asyncio.run(drain())) == sorted(sent)
