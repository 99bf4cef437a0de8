"""A gathering receive on a sharded queue against a real worker, when one of the shards fails: what the other
shards handed over is answered, not left in flight unseen until its visibility timeout."""

from __future__ import annotations

import asyncio
import zlib
from pathlib import Path
from typing import Any

import pytest

from ferrymq.aws.queue_store import QueueRecord, Shard
from ferrymq.clock import ManualClock
from ferrymq.errors import NotLeader
from ferrymq.frontend import sharded
from tests.functional.storage_workers.in_process import worker
from tests.functional.storage_workers.test_server_fifo import message
from tests.functional.storage_workers.worker_calls import RETENTION

# shard 0 lives on partition 0, which the worker leads; shard 1 on partition 1, which it does not
QUEUE = QueueRecord("000000000000", "q", "qid", 0, more_shards=(Shard(1),))


def attempt_starting_at(index: int) -> str:
    """A ReceiveRequestAttemptId whose gathering receive asks shard ``index`` first."""
    return next(f"a{n}" for n in range(100) if zlib.crc32(f"a{n}".encode()) % len(QUEUE.shards) == index)


@pytest.mark.parametrize("first", [0, 1], ids=["failing-shard-last", "failing-shard-first"])
def test_messages_from_one_shard_are_answered_when_another_shard_fails(tmp_path: Path, first: int) -> None:
    async def scenario() -> None:
        async with worker(tmp_path, partition=0) as (_, client):
            # given a message on shard 0 and a shard 1 whose partition's worker answers NotLeader
            await client.send(0, QUEUE.storage_id(0), [message("kept")], retention_seconds=RETENTION)

            async def receive(index: int, wanted: int, wait: float) -> list[dict[str, Any]]:
                return await client.receive(QUEUE.shards[index].partition, QUEUE.storage_id(index),
                                            max_messages=wanted, visibility_timeout=600, wait_seconds=wait,
                                            retention_seconds=RETENTION)

            # when a receive gathers from both shards, in either order
            got = await sharded.gather(QUEUE, receive, max_messages=10, wait_seconds=0, clock=ManualClock(),
                                       attempt_id=attempt_starting_at(first))
            # then the message shard 0 handed over is in the answer, with a handle that deletes it at once
            assert [m["body"] for m in got] == ["kept"]
            index, handle = sharded.split_handle(QUEUE, got[0]["receipt"])
            assert index == 0
            assert await client.delete(0, QUEUE.storage_id(0), [handle]) == [None]
            assert (await client.stats(0, QUEUE.storage_id(0), retention_seconds=RETENTION))["in_flight"] == 0

    asyncio.run(scenario())


def test_a_receive_fails_with_the_shards_error_when_no_shard_answered(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path, partition=0) as (_, client):
            # given an empty shard 0 and a shard 1 whose partition's worker answers NotLeader
            async def receive(index: int, wanted: int, wait: float) -> list[dict[str, Any]]:
                return await client.receive(QUEUE.shards[index].partition, QUEUE.storage_id(index),
                                            max_messages=wanted, visibility_timeout=600, wait_seconds=wait,
                                            retention_seconds=RETENTION)

            # when a long-polling receive gathers, then it fails with the shard's error instead of waiting on
            with pytest.raises(NotLeader):
                await sharded.gather(QUEUE, receive, max_messages=10, wait_seconds=20, clock=ManualClock())

    asyncio.run(scenario())
