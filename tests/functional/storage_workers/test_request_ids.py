"""A worker handling an RPC made on behalf of a front-end request logs its lines with that request's id."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferrymq import logs
from ferrymq.errors import SqsError
from ferrymq.settings import Settings
from tests.functional.storage_workers.in_process import worker
from tests.functional.storage_workers.test_server_fifo import message
from tests.support.logging_state import restored_logging


@pytest.fixture
def worker_log() -> Iterator[io.StringIO]:
    """The process's log as JSON lines at DEBUG, in memory; the root logger is put back afterwards."""
    with restored_logging():
        out = io.StringIO()
        logs.configure("worker", Settings(log_level="DEBUG"), stream=out)
        yield out


def _worker_lines(out: io.StringIO) -> list[dict]:
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return [line for line in lines if line["logger"] == "ferrymq.storage.server.worker"]


def test_the_worker_logs_a_request_and_its_failure_under_the_front_end_s_request_id(
    tmp_path: Path, worker_log: io.StringIO
) -> None:
    async def scenario() -> None:
        async with worker(tmp_path / "w", partition=0) as (_, client):
            # given a call made inside a front-end request, and one outside any
            token = logs.REQUEST_ID.set("req-in-flight")
            try:
                await client.send(0, "q", [message("body")], retention_seconds=60)
                # when a call of that request fails in the worker (a partition it does not serve)
                with pytest.raises(SqsError):
                    await client.purge(7, "q")
            finally:
                logs.REQUEST_ID.reset(token)
            await client.purge(0, "q")

    asyncio.run(scenario())
    lines = _worker_lines(worker_log)
    # then the worker's lines about the request's calls name its id, and the other call's line names none
    traced = [line for line in lines if line.get("request_id") == "req-in-flight"]
    assert [line["message"].split(":")[0] for line in traced] == [
        "SEND request for partition 0",
        "PURGE request for partition 7",
        "PURGE request answered NotLeader",
    ]
    untraced = [line for line in lines if "request_id" not in line]
    assert "PURGE request for partition 0" in [line["message"] for line in untraced]
