"""A send resent after an unknown outcome, through the front end's Dispatcher, to a real worker process whose
clock runs ten seconds behind the front end's: the resend is answered by message id, so a message the first
attempt stored is neither stored twice nor, once a consumer deleted it, brought back."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from ferrymq.aws.partitions import PartitionMap
from ferrymq.aws.queue_store import QueueRecord
from ferrymq.clock import SystemClock
from ferrymq.errors import InvalidParameterValue
from ferrymq.frontend.dispatch import Dispatcher
from ferrymq.rpc.client import WorkerClient, WorkerConnectionLost
from ferrymq.rpc.framing import Op
from ferrymq.rpc.leaders import LeaderClients
from ferrymq.settings import Settings
from tests.functional.storage_workers.worker_calls import RETENTION, drain
from tests.integration.conftest import WorkerProcess

PARTITION = 73


def message(body: str) -> dict:
    return {"id": str(uuid.uuid4()), "body": body, "attrs": {}, "md5_body": "md5", "md5_attrs": None}


@pytest.mark.timeout(120)
def test_a_resend_to_a_worker_whose_clock_is_behind_stores_no_copy_and_brings_back_nothing_deleted(
    start_worker: Callable[..., WorkerProcess], aws_settings: Settings, tmp_path: Path
) -> None:
    # given a worker whose wall clock runs ten seconds behind the front end's, leading the queue's partition
    worker = start_worker(tmp_path / "w", worker_id="w-skewed", partition=PARTITION,
                          env={"FERRYMQ_WORKER_CLOCK_SKEW_MS": "-10000"})
    queue = QueueRecord(account="000000000000", name="skewed", queue_id=f"skewed/{uuid.uuid4().hex[:8]}",
                        partition=PARTITION)
    leaders = LeaderClients(PartitionMap.from_settings(aws_settings).lookup, clock=SystemClock(), ttl=60,
                            connect_timeout=2, request_timeout=10)
    dispatcher = Dispatcher(leaders, failover_seconds=5)
    consumer = WorkerClient(worker.host, worker.port, connect_timeout=2)
    batch = [message("deleted meanwhile"), message("still held")]

    async def first_attempt(client: WorkerClient) -> list[dict]:
        # the worker stores the batch, a consumer takes the first message and deletes it, and the answer
        # never reaches the front end (the connection drops with it): the outcome is unknown
        await client.send(PARTITION, queue.queue_id, batch, retention_seconds=RETENTION)
        (got,) = await consumer.receive(PARTITION, queue.queue_id, max_messages=1, visibility_timeout=600,
                                        wait_seconds=0, retention_seconds=RETENTION)
        assert got["body"] == "deleted meanwhile"
        assert await consumer.delete(PARTITION, queue.queue_id, [got["receipt"]]) == [None]
        raise WorkerConnectionLost("The connection to the storage worker dropped before its answer came.")

    async def resend(client: WorkerClient) -> list[dict]:
        return await client.send(PARTITION, queue.queue_id, batch, retention_seconds=RETENTION, resend=True)

    async def scenario() -> list[dict]:
        try:
            # when the send is dispatched and, its outcome unknown, resent
            answer = await dispatcher.call(queue, first_attempt, idempotent=False, resend=resend)
            assert [row["id"] for row in answer] == [m["id"] for m in batch]
            # (a resend flag that is neither true nor false is refused, storing nothing)
            row = ["x", "body", {}, "md5", None, 0, {}]
            with pytest.raises(InvalidParameterValue, match="resend is a boolean"):
                await consumer._call(Op.SEND, [PARTITION, queue.queue_id, [row], RETENTION, False, "yes"])
            return await drain(consumer, queue.queue_id, partition=PARTITION)
        finally:
            await consumer.close()
            await dispatcher.close()

    held = asyncio.run(scenario())
    # then the queue holds the undeleted message once, and the deleted one did not come back
    assert [m["body"] for m in held] == ["still held"]
    assert worker.terminate() == 0
