"""Message move tasks over the worker RPC with in-process workers: to queues of the same worker and of
another one, cancelled, failing, and resumed by a worker opened again on the same log."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from ferrymq.destinations import QueueTarget
from ferrymq.errors import InvalidParameterValue, ResourceNotFound
from ferrymq.rpc.client import WorkerClient
from tests.functional.storage_workers.in_process import StandInPeers, worker
from tests.functional.storage_workers.worker_calls import RETENTION, drain, eventually, task_listing

DLQ = "000000000000/work-dlq/1"
DLQ_ARN = "arn:aws:sqs:us-east-1:000000000000:work-dlq"
SRC = "000000000000/work/2"
SRC_ARN = "arn:aws:sqs:us-east-1:000000000000:work"
OTHER = "000000000000/other/3"
OTHER_ARN = "arn:aws:sqs:us-east-1:000000000000:other"


def dead_letter(body: str, source_arn: str | None = SRC_ARN) -> dict:
    system = {"DeadLetterQueueSourceArn": source_arn} if source_arn else {}
    return {"id": str(uuid.uuid4()), "body": body, "md5_body": "md5", "system": system}


def task(handle: str, *, destination: QueueTarget | None = None, rate: int | None = None) -> dict:
    return {
        "task_handle": handle,
        "source_arn": DLQ_ARN,
        "destination": None if destination is None else destination.as_wire(),
        "max_per_second": rate,
        "started_ts": int(time.time() * 1000),
    }


async def finished(client: WorkerClient, handle: str, timeout: float = 15.0) -> dict:
    """The task's listing once it is no longer RUNNING or CANCELLING."""

    async def task_ended() -> bool:
        return (await task_listing(client, DLQ, handle))["status"] not in ("RUNNING", "CANCELLING")

    await eventually(task_ended, timeout)
    return await task_listing(client, DLQ, handle)


async def progressed(client: WorkerClient, handle: str, timeout: float = 10.0) -> None:
    """Wait until the task has moved at least one message."""

    async def task_moved_one() -> bool:
        return (await task_listing(client, DLQ, handle))["moved"] > 0

    await eventually(task_moved_one, timeout)


async def hold_one(client: WorkerClient) -> str:
    """Receive one DLQ message for ten minutes, as a consumer would; returns its receipt handle.

    A task waits for messages in flight, so it cannot finish while this one is held: whatever else the test
    does meanwhile, the task is still part of the way through, however fast it moves the rest."""
    (held,) = await client.receive(0,
        DLQ, max_messages=1, visibility_timeout=600, wait_seconds=0, retention_seconds=RETENTION
    )
    return held["receipt"]


async def give_back(client: WorkerClient, receipt: str) -> None:
    """The consumer makes the held message visible again, for the task to take."""
    assert await client.change_visibility(0, DLQ, [(receipt, 0)]) == [None]


def test_messages_go_back_to_their_source_queues_on_the_same_worker(tmp_path: Path) -> None:
    async def scenario() -> None:
        peers = StandInPeers()
        peers.add_queue(QueueTarget(SRC, 0, False, RETENTION, SRC_ARN))
        peers.add_queue(QueueTarget(OTHER, 0, False, RETENTION, OTHER_ARN))
        async with worker(tmp_path, peers=peers) as (_, client):
            # given dead letters from two source queues
            letters = [dead_letter(f"w{i}") for i in range(3)] + [dead_letter("o", OTHER_ARN)]
            await client.send(0, DLQ, letters, retention_seconds=RETENTION)
            # when a task without destination runs
            started = await client.start_move_task(0, DLQ, task("t-1"))
            assert (started["status"], started["to_move"], started["destination_arn"]) == ("RUNNING", 4, None)
            done = await finished(client, "t-1")
            # then it completed, each message is back in its own source as a new message, and the DLQ is empty
            assert (done["status"], done["moved"], done["to_move"], done["failure_reason"]) == ("COMPLETED", 4, 4, None)
            back = await drain(client, SRC)
            assert sorted(m["body"] for m in back) == ["w0", "w1", "w2"]
            assert [m["body"] for m in await drain(client, OTHER)] == ["o"]
            assert not {m["id"] for m in back} & {m["id"] for m in letters}
            assert all(m["receive_count"] == 1 and "DeadLetterQueueSourceArn" not in m["system"] for m in back)
            assert await drain(client, DLQ) == []

    asyncio.run(scenario())


def test_messages_go_to_a_destination_on_another_worker(tmp_path: Path) -> None:
    async def scenario() -> None:
        peers_a, peers_b = StandInPeers(), StandInPeers()
        destination = QueueTarget(OTHER, 1, False, RETENTION, OTHER_ARN)
        peers_a.add_queue(destination)
        async with (
            worker(tmp_path / "a", partition=0, peers=peers_a) as (_, client_a),
            worker(tmp_path / "b", partition=1, peers=peers_b) as (_, client_b),
        ):
            peers_a.add_worker(1, client_b.host, client_b.port)
            await client_a.send(0, DLQ, [dead_letter(f"m{i}") for i in range(25)], retention_seconds=RETENTION)
            await client_a.start_move_task(0, DLQ, task("t-1", destination=destination))
            done = await finished(client_a, "t-1")
            assert (done["status"], done["moved"], done["destination_arn"]) == ("COMPLETED", 25, OTHER_ARN)
            arrived = await drain(client_b, OTHER, partition=1)
            assert sorted(m["body"] for m in arrived) == sorted(f"m{i}" for i in range(25))
            assert await client_a.stats(0, DLQ, retention_seconds=RETENTION) == {"visible": 0, "in_flight": 0,
                                                                              "delayed": 0}

    asyncio.run(scenario())


def test_only_one_task_runs_at_a_time_and_a_cancelled_one_stops(tmp_path: Path) -> None:
    async def scenario() -> None:
        peers = StandInPeers()
        peers.add_queue(QueueTarget(SRC, 0, False, RETENTION, SRC_ARN))
        async with worker(tmp_path, peers=peers) as (_, client):
            await client.send(0, DLQ, [dead_letter(f"m{i}") for i in range(40)], retention_seconds=RETENTION)
            # given a task moving two messages a second, which cannot finish while a consumer holds one of them
            await hold_one(client)
            await client.start_move_task(0, DLQ, task("slow", rate=2))
            # then a second task cannot start while it runs
            with pytest.raises(InvalidParameterValue, match="There is already a task running"):
                await client.start_move_task(0, DLQ, task("second"))
            await progressed(client, "slow")
            # when it is cancelled, then it stops having moved some, and the rest stays
            cancelled = await client.cancel_move_task(0, DLQ, "slow")
            done = await finished(client, "slow")
            assert done["status"] == "CANCELLED"
            assert 1 <= cancelled["moved"] <= done["moved"] < 40
            left = await client.stats(0, DLQ, retention_seconds=RETENTION)
            assert (left["visible"], left["in_flight"]) == (39 - done["moved"], 1)
            # and cancelling it again is not possible
            with pytest.raises(ResourceNotFound):
                await client.cancel_move_task(0, DLQ, "slow")

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("source_arn", "reason"),
    [
        ("arn:aws:sqs:us-east-1:000000000000:deleted-queue", "AWS.SimpleQueueService.NonExistentQueue"),
        (None, "CouldNotDetermineMessageSource"),
    ],
)
def test_a_message_without_a_known_source_fails_the_task_and_stays(
    tmp_path: Path, source_arn: str | None, reason: str
) -> None:
    async def scenario() -> None:
        peers = StandInPeers()
        async with worker(tmp_path, peers=peers) as (_, client):
            await client.send(0, DLQ, [dead_letter("lost", source_arn)], retention_seconds=RETENTION)
            await client.start_move_task(0, DLQ, task("t-1"))
            done = await finished(client, "t-1")
            assert (done["status"], done["failure_reason"], done["moved"]) == ("FAILED", reason, 0)
            assert [m["body"] for m in await drain(client, DLQ)] == ["lost"]

    asyncio.run(scenario())


def test_a_destination_that_refuses_the_messages_fails_the_task(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a FIFO destination on another worker for standard dead letters, which carry no group
        peers_a, peers_b = StandInPeers(), StandInPeers()
        destination = QueueTarget("000000000000/other.fifo/4", 1, True, RETENTION, OTHER_ARN)
        peers_a.add_queue(destination)
        async with (
            worker(tmp_path / "a", partition=0, peers=peers_a) as (_, client_a),
            worker(tmp_path / "b", partition=1, peers=peers_b) as (_, client_b),
        ):
            peers_a.add_worker(1, client_b.host, client_b.port)
            await client_a.send(0, DLQ, [dead_letter("no group")], retention_seconds=RETENTION)
            await client_a.start_move_task(0, DLQ, task("t-1", destination=destination))
            # then the task fails with the destination's reason and the message stays, visible
            done = await finished(client_a, "t-1")
            assert (done["status"], done["failure_reason"], done["moved"]) == ("FAILED", "InvalidParameterValue", 0)
            assert [m["body"] for m in await drain(client_a, DLQ)] == ["no group"]

    asyncio.run(scenario())


def test_a_task_whose_destination_is_deleted_fails(tmp_path: Path) -> None:
    async def scenario() -> None:
        peers = StandInPeers()
        destination = QueueTarget(OTHER, 0, False, RETENTION, OTHER_ARN)
        peers.add_queue(destination)
        async with worker(tmp_path, peers=peers) as (_, client):
            await client.send(0, DLQ, [dead_letter(f"m{i}") for i in range(30)], retention_seconds=RETENTION)
            # given a task under way, which cannot finish while a consumer holds one of its messages
            held = await hold_one(client)
            await client.start_move_task(0, DLQ, task("t-1", destination=destination, rate=10))
            await progressed(client, "t-1")
            # when its destination is deleted, and the held message comes back for the task to move
            peers.drop_queue(OTHER_ARN)
            await give_back(client, held)
            # then the task fails part of the way through
            done = await finished(client, "t-1")
            assert (done["status"], done["failure_reason"]) == ("FAILED", "AWS.SimpleQueueService.NonExistentQueue")
            assert 0 < done["moved"] < 30

    asyncio.run(scenario())


def test_a_worker_opened_again_resumes_the_task(tmp_path: Path) -> None:
    async def scenario() -> None:
        peers = StandInPeers()
        peers.add_queue(QueueTarget(SRC, 0, False, RETENTION, SRC_ARN))
        # given a task moving five messages a second, stopped with the worker part of the way through (it
        # cannot finish while a consumer holds one of its messages)
        async with worker(tmp_path, peers=peers) as (_, client):
            await client.send(0, DLQ, [dead_letter(f"m{i}") for i in range(12)], retention_seconds=RETENTION)
            held = await hold_one(client)
            await client.start_move_task(0, DLQ, task("t-1", rate=5))
            await progressed(client, "t-1")
        # when a worker opens the same log, then the task is still running where it stood
        async with worker(tmp_path, peers=peers) as (_, client):
            (listed,) = await client.list_move_tasks(0, DLQ)
            assert listed["status"] == "RUNNING" and 0 < listed["moved"] < 12
            # and once the held message comes back, the task completes
            await give_back(client, held)
            done = await finished(client, "t-1")
            assert (done["status"], done["moved"]) == ("COMPLETED", 12)
            assert sorted(m["body"] for m in await drain(client, SRC)) == sorted(f"m{i}" for i in range(12))

    asyncio.run(scenario())


class BrokenCatalogPeers(StandInPeers):
    """Peers whose queue lookups fail with an error nothing expects (a bug, not an outage)."""

    async def queue(self, arn: str) -> QueueTarget | None:
        raise KeyError(arn)


def test_a_task_that_crashes_ends_failed_and_a_new_task_can_start(tmp_path: Path) -> None:
    async def scenario() -> None:
        peers = BrokenCatalogPeers()
        async with worker(tmp_path, peers=peers) as (_, client):
            # given dead letters, and a task whose destination lookup crashes
            await client.send(0, DLQ, [dead_letter("stays")], retention_seconds=RETENTION)
            await client.start_move_task(0, DLQ, task("t-1"))
            # then the task ends FAILED with an internal reason, as ListMessageMoveTasks shows it
            done = await finished(client, "t-1")
            assert (done["status"], done["failure_reason"], done["moved"]) == (
                "FAILED", "AWS.SimpleQueueService.InternalError", 0
            )
            # and a new task is accepted, and the message is still in the DLQ
            assert (await client.start_move_task(0, DLQ, task("t-2")))["status"] == "RUNNING"
            assert (await finished(client, "t-2"))["status"] == "FAILED"
            assert [m["body"] for m in await drain(client, DLQ)] == ["stays"]

    asyncio.run(scenario())
