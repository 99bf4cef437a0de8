"""Two worker processes leading two partitions: dead-letter redrive from one to the other, a move task back
through the queue catalog, and a move task that survives kill -9 of its worker without moving anything twice.

The workers find each other in the partition map and the queues in the queue catalog (moto's DynamoDB, or
FERRYMQ_TEST_AWS_ENDPOINT); every test uses partitions and queue names of its own.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from ferrymq.aws import session
from ferrymq.aws.queue_store import QueueRecord, QueueStore
from ferrymq.destinations import QueueTarget, redrive_option
from ferrymq.rpc.client import WorkerClient
from ferrymq.settings import Settings
from tests.functional.storage_workers.worker_calls import RETENTION, drain, eventually, task_listing
from tests.integration.conftest import WorkerProcess

ACCOUNT = "000000000000"


def make_queue(settings: Settings, name: str, partition: int) -> tuple[str, str]:
    """A queue in the catalog; returns its queue id and ARN."""
    queue_id = f"{ACCOUNT}/{name}/{uuid.uuid4().hex[:8]}"
    store = QueueStore(session.client("dynamodb", settings), settings.queues_table)
    store.put_new(QueueRecord(account=ACCOUNT, name=name, queue_id=queue_id, partition=partition), None)
    return queue_id, f"arn:aws:sqs:{settings.region}:{ACCOUNT}:{name}"


def message(body: str, system: dict | None = None) -> dict:
    return {"id": str(uuid.uuid4()), "body": body, "md5_body": "md5", "system": system or {}}


def test_redrive_to_another_worker_and_a_move_task_back(
    start_worker: Callable[..., WorkerProcess], aws_settings: Settings, tmp_path: Path
) -> None:
    # given a source queue on partition 20 and its dead-letter queue on partition 21, each led by a worker
    name = f"work-{uuid.uuid4().hex[:8]}"
    source_id, source_arn = make_queue(aws_settings, name, 20)
    dlq_id, dlq_arn = make_queue(aws_settings, f"{name}-dlq", 21)
    worker_a = start_worker(tmp_path / "a", worker_id="w-20", partition=20)
    worker_b = start_worker(tmp_path / "b", worker_id="w-21", partition=21)
    redrive = redrive_option(
        QueueTarget(dlq_id, 21, False, RETENTION, dlq_arn), max_receive_count=1, source_arn=source_arn
    )

    async def scenario() -> None:
        a, b = WorkerClient(worker_a.host, worker_a.port), WorkerClient(worker_b.host, worker_b.port)
        try:
            sent = await a.send(20, source_id, [message(f"m{i}") for i in range(3)], retention_seconds=RETENTION)
            first = await a.receive(20, source_id, max_messages=10, visibility_timeout=0, wait_seconds=0,
                                    retention_seconds=RETENTION, redrive=redrive)
            assert len(first) == 3
            # when they are received again past their max receive count, then none is returned ...
            assert await a.receive(20, source_id, max_messages=10, visibility_timeout=30, wait_seconds=0,
                                   retention_seconds=RETENTION, redrive=redrive) == []

            # ... and all of them reach the DLQ on the other worker, and leave the source (held in flight there
            # until the DLQ's worker acknowledged them, then deleted: the two stats calls may fall in between)
            async def moved() -> bool:
                in_dlq = (await b.stats(21, dlq_id, retention_seconds=RETENTION))["visible"] == 3
                source = await a.stats(20, source_id, retention_seconds=RETENTION)
                return in_dlq and source == {"visible": 0, "in_flight": 0, "delayed": 0}

            await eventually(moved)
            dead = await b.receive(21, dlq_id, max_messages=10, visibility_timeout=0, wait_seconds=0,
                                   retention_seconds=RETENTION)
            assert {m["id"] for m in dead} == {s["id"] for s in sent}
            assert all(m["system"]["DeadLetterQueueSourceArn"] == source_arn for m in dead)
            assert {m["sent_ts"] for m in dead} == {s["sent_ts"] for s in sent}

            # when a move task without destination runs on the DLQ's worker
            await b.start_move_task(21, dlq_id, {"task_handle": "back", "source_arn": dlq_arn, "destination": None,
                                             "max_per_second": None, "started_ts": int(time.time() * 1000)})

            async def completed() -> bool:
                return (await task_listing(b, dlq_id, "back", partition=21))["status"] == "COMPLETED"

            await eventually(completed)
            # then the messages are back in their source queue on the first worker, as new messages
            back = await drain(a, source_id, partition=20)
            assert sorted(m["body"] for m in back) == ["m0", "m1", "m2"]
            assert not {m["id"] for m in back} & {s["id"] for s in sent}
            assert all(m["receive_count"] == 1 for m in back)
            assert await drain(b, dlq_id, partition=21) == []
            assert (await task_listing(b, dlq_id, "back", partition=21))["moved"] == 3
        finally:
            await a.close()
            await b.close()

    asyncio.run(scenario())
    assert worker_a.terminate() == 0
    assert worker_b.terminate() == 0


def test_a_move_task_survives_kill_9_and_moves_nothing_twice(
    start_worker: Callable[..., WorkerProcess], aws_settings: Settings, tmp_path: Path
) -> None:
    # given 150 dead letters in a DLQ on partition 22, to be moved to a queue on partition 23
    name = f"crash-{uuid.uuid4().hex[:8]}"
    dlq_id, dlq_arn = make_queue(aws_settings, f"{name}-dlq", 22)
    dest_id, dest_arn = make_queue(aws_settings, name, 23)
    hold = ["--transfer-hold-seconds", "1"]
    worker_a = start_worker(tmp_path / "a", worker_id="w-22", partition=22, extra_args=hold)
    worker_b = start_worker(tmp_path / "b", worker_id="w-23", partition=23, extra_args=hold)
    bodies = [f"dead {i}" for i in range(150)]
    task = {
        "task_handle": "crashy",
        "source_arn": dlq_arn,
        "destination": QueueTarget(dest_id, 23, False, RETENTION, dest_arn).as_wire(),
        "max_per_second": 40,
        "started_ts": int(time.time() * 1000),
    }

    async def start_and_crash() -> tuple[int, str]:
        a = WorkerClient(worker_a.host, worker_a.port)
        try:
            system = {"DeadLetterQueueSourceArn": dest_arn}
            for i in range(0, 150, 10):
                await a.send(22, dlq_id, [message(b, system) for b in bodies[i : i + 10]], retention_seconds=RETENTION)
            # and one of them in a consumer's hands: the task waits for it, so it cannot finish before the kill
            (held,) = await a.receive(22, dlq_id, max_messages=1, visibility_timeout=600, wait_seconds=0,
                                      retention_seconds=RETENTION)
            started = await a.start_move_task(22, dlq_id, task)
            assert started["to_move"] == 150

            # when the worker is killed with SIGKILL while the task is part of the way through
            async def under_way() -> bool:
                return (await task_listing(a, dlq_id, "crashy", partition=22))["moved"] >= 20

            await eventually(under_way)
            moved = (await task_listing(a, dlq_id, "crashy", partition=22))["moved"]
            worker_a.kill9()
            return moved, held["receipt"]
        finally:
            await a.close()

    moved_before, held_receipt = asyncio.run(start_and_crash())
    assert moved_before < 150
    restarted = start_worker(tmp_path / "a", worker_id="w-22", partition=22, extra_args=hold)

    async def after_restart() -> None:
        a, b = WorkerClient(restarted.host, restarted.port), WorkerClient(worker_b.host, worker_b.port)
        try:
            # then the restarted worker knows the task and its progress
            assert (await task_listing(a, dlq_id, "crashy", partition=22))["moved"] >= moved_before
            # and once the consumer gives the held message back, it carries the task to the end
            assert await a.change_visibility(22, dlq_id, [(held_receipt, 0)]) == [None]

            async def completed() -> bool:
                return (await task_listing(a, dlq_id, "crashy", partition=22))["status"] == "COMPLETED"

            await eventually(completed, timeout=30)
            done = await task_listing(a, dlq_id, "crashy", partition=22)
            assert (done["moved"], done["to_move"]) == (150, 150)
            # and every message arrived exactly once, and none is left behind
            arrived = await drain(b, dest_id, partition=23)
            assert sorted(m["body"] for m in arrived) == sorted(bodies)
            assert await drain(a, dlq_id, partition=22) == []
        finally:
            await a.close()
            await b.close()

    asyncio.run(after_restart())
    assert restarted.terminate() == 0
    assert worker_b.terminate() == 0
