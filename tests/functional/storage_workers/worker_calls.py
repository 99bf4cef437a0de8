"""Calls to a storage worker over its RPC that tests at every level repeat: in-process workers here, worker
processes in ``tests/integration/storage_workers``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from ferrymq.rpc.client import WorkerClient

RETENTION = 345600


async def drain(client: WorkerClient, queue_id: str, *, partition: int = 0) -> list[dict]:
    """Every message visible in the queue (of ``partition``), now in flight for ten minutes."""
    out: list[dict] = []
    while got := await client.receive(partition,
        queue_id, max_messages=10, visibility_timeout=600, wait_seconds=0, retention_seconds=RETENTION
    ):
        out.extend(got)
    return out


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 20.0) -> None:
    """Wait until ``check()`` is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"{check.__name__} not reached in {timeout} s"
        await asyncio.sleep(0.05)


async def task_listing(client: WorkerClient, queue_id: str, handle: str, *, partition: int = 0) -> dict:
    """The move task ``handle`` of the queue as ListMessageMoveTasks shows it."""
    return {t["task_handle"]: t for t in await client.list_move_tasks(partition, queue_id)}[handle]
