"""FIFO queues, the in-flight limit and dead-letter redrive over the worker RPC, with in-process workers on
loopback (two of them, each leading its own partition, for redrive into another worker's queue)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from ferrymq.errors import InvalidParameterValue, OverLimit
from ferrymq.rpc.client import WorkerClient
from tests.functional.storage_workers.in_process import StandInPeers, worker
from tests.functional.storage_workers.worker_calls import RETENTION, eventually

Q = "000000000000/orders.fifo/1"
SRC = "000000000000/work/2"
DLQ = "000000000000/work-dlq/3"
SRC_ARN = "arn:aws:sqs:us-east-1:000000000000:work"


def fifo_message(group: str, body: str, message_id: str | None = None) -> dict:
    return {
        "id": message_id or str(uuid.uuid4()),
        "body": body,
        "attrs": {},
        "md5_body": "md5",
        "md5_attrs": None,
        "delay": 0,
        "system": {},
        "group": group,
        "dedup_id": f"dedup-{body}",
    }


def message(body: str) -> dict:
    return {"id": str(uuid.uuid4()), "body": body, "md5_body": "md5", "system": {"SenderId": "AIDA"}}


async def receive(client: WorkerClient, queue: str, *, partition: int = 0, **kwargs: object) -> list[dict]:
    options: dict = {"max_messages": 10, "visibility_timeout": 30, "wait_seconds": 0, "retention_seconds": RETENTION}
    options.update(kwargs)
    return await client.receive(partition, queue, **options)  # type: ignore[arg-type]


def test_fifo_sends_and_receives_over_the_rpc(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            # given messages of two groups sent to a FIFO queue
            sent = await client.send(0,
                Q, [fifo_message("a", "a1"), fifo_message("b", "b1"), fifo_message("a", "a2")],
                retention_seconds=RETENTION, fifo=True,
            )
            # then each has a 20-digit sequence number, increasing, and none is a duplicate
            assert [len(s["seq"]) for s in sent] == [20, 20, 20]
            assert sent[0]["seq"] < sent[1]["seq"] < sent[2]["seq"]
            assert not any(s["duplicate"] for s in sent)
            # when received, then group a comes first in order, with its FIFO fields
            got = await receive(client, Q, fifo=True)
            assert [(m["body"], m["group"], m["dedup_id"]) for m in got] == [
                ("a1", "a", "dedup-a1"), ("a2", "a", "dedup-a2"), ("b1", "b", "dedup-b1")
            ]
            assert [m["seq"] for m in got] == [sent[0]["seq"], sent[2]["seq"], sent[1]["seq"]]

    asyncio.run(scenario())


def test_a_resend_by_message_id_is_answered_with_the_original(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            first = await client.send(0, Q, [fifo_message("g", "m", "id-1")], retention_seconds=RETENTION, fifo=True)
            again = await client.send(0, Q, [fifo_message("g", "m", "id-1")], retention_seconds=RETENTION, fifo=True)
            assert again == [{**first[0], "duplicate": True}]
            assert await client.stats(0, Q, retention_seconds=RETENTION) == {"visible": 1, "in_flight": 0, "delayed": 0}

    asyncio.run(scenario())


def test_a_receive_attempt_is_replayed_and_an_expired_handle_cannot_delete(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            await client.send(0, Q, [fifo_message("g", "m")], retention_seconds=RETENTION, fifo=True)
            # given a receive with an attempt id, retried
            first = await receive(client, Q, fifo=True, attempt_id="attempt-1", visibility_timeout=1)
            again = await receive(client, Q, fifo=True, attempt_id="attempt-1", visibility_timeout=1)
            # then the retry gets the same message and receipt handle
            assert again == first and first[0]["receive_count"] == 1
            # when the visibility timeout runs out, then the handle has expired
            await asyncio.sleep(1.1)
            handle = first[0]["receipt"]
            assert await client.delete(0, Q, [handle]) == [
                (
                    InvalidParameterValue.code,
                    f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.",
                )
            ]

    asyncio.run(scenario())


def test_a_long_poll_on_a_locked_group_returns_when_the_lock_is_deleted(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            await client.send(0,
                Q, [fifo_message("g", "first"), fifo_message("g", "second")], retention_seconds=RETENTION, fifo=True
            )
            (first,) = await receive(client, Q, fifo=True, max_messages=1, visibility_timeout=600)
            # given a long poll waiting while the group is locked
            poll = asyncio.ensure_future(receive(client, Q, fifo=True, wait_seconds=10))
            await asyncio.sleep(0.2)
            assert not poll.done()
            # when the message holding the lock is deleted, then the long poll gets the next one
            await client.delete(0, Q, [first["receipt"]])
            got = await asyncio.wait_for(poll, 5)
            assert [m["body"] for m in got] == ["second"]

    asyncio.run(scenario())


def test_the_in_flight_limit_fails_a_short_poll_and_empties_a_long_one(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            await client.send(0, SRC, [message(str(i)) for i in range(3)], retention_seconds=RETENTION)
            assert len(await receive(client, SRC, max_messages=2, max_in_flight=2)) == 2
            with pytest.raises(OverLimit):
                await receive(client, SRC, max_in_flight=2)
            assert await receive(client, SRC, max_in_flight=2, wait_seconds=0.3) == []
            assert len(await receive(client, SRC, max_in_flight=3)) == 1

    asyncio.run(scenario())


def redrive(dlq_partition: int) -> dict:
    return {
        "max_receive_count": 1,
        "dlq_queue_id": DLQ,
        "dlq_partition": dlq_partition,
        "dlq_fifo": False,
        "source_arn": SRC_ARN,
        "dlq_retention_seconds": RETENTION,
    }


def test_redrive_into_a_queue_of_the_same_worker(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            [sent] = await client.send(0, SRC, [message("poison")], retention_seconds=RETENTION)
            await receive(client, SRC, visibility_timeout=0, redrive=redrive(0))
            # given a long poll on the DLQ
            dlq_poll = asyncio.ensure_future(receive(client, DLQ, wait_seconds=5))
            await asyncio.sleep(0.1)
            # when the source is received from again, then the message moves, and the DLQ's long poll gets it
            assert await receive(client, SRC, redrive=redrive(0)) == []
            (dead,) = await asyncio.wait_for(dlq_poll, 5)
            assert (dead["id"], dead["sent_ts"], dead["receive_count"]) == (sent["id"], sent["sent_ts"], 2)
            assert dead["system"] == {"SenderId": "AIDA", "DeadLetterQueueSourceArn": SRC_ARN}

    asyncio.run(scenario())


def test_redrive_into_a_queue_another_worker_leads(tmp_path: Path) -> None:
    async def scenario() -> None:
        peers_a, peers_b = StandInPeers(), StandInPeers()
        async with (
            worker(tmp_path / "a", partition=0, peers=peers_a) as (server_a, client_a),
            worker(tmp_path / "b", partition=1, peers=peers_b) as (_, client_b),
        ):
            peers_a.add_worker(1, client_b.host, client_b.port)
            [sent] = await client_a.send(0, SRC, [message("poison")], retention_seconds=RETENTION)
            await receive(client_a, SRC, visibility_timeout=0, redrive=redrive(1))
            # when the source on worker a is received from again, then the message is not returned
            assert await receive(client_a, SRC, redrive=redrive(1)) == []

            # and it reaches the DLQ on worker b, and leaves the source once b acknowledged it
            async def moved() -> bool:
                stats = await client_a.stats(0, SRC, retention_seconds=RETENTION)
                return stats == {"visible": 0, "in_flight": 0, "delayed": 0}

            await eventually(moved)
            (dead,) = await receive(client_b, DLQ, partition=1)
            assert (dead["id"], dead["sent_ts"], dead["receive_count"]) == (sent["id"], sent["sent_ts"], 2)
            assert dead["system"]["DeadLetterQueueSourceArn"] == SRC_ARN
            assert server_a.replicas[0].term.forwarder.forwarded == 1

    asyncio.run(scenario())


def test_redrive_into_an_unreachable_worker_keeps_the_message_and_tries_again(tmp_path: Path) -> None:
    async def scenario() -> None:
        peers_a, peers_b = StandInPeers(), StandInPeers()
        async with worker(tmp_path / "a", partition=0, peers=peers_a) as (_, client_a):
            await client_a.send(0, SRC, [message("poison")], retention_seconds=RETENTION)
            await receive(client_a, SRC, visibility_timeout=0, redrive=redrive(1))
            # given no worker for the DLQ's partition yet: the hand-over fails and the message stays
            assert await receive(client_a, SRC, redrive=redrive(1)) == []
            await asyncio.sleep(0.2)
            assert (await client_a.stats(0, SRC, retention_seconds=RETENTION))["in_flight"] == 1
            # when the DLQ's worker is there and the hold has run out, then the next receive hands it over
            async with worker(tmp_path / "b", partition=1, peers=peers_b) as (_, client_b):
                peers_a.add_worker(1, client_b.host, client_b.port)
                await asyncio.sleep(1.0)

                async def arrived() -> bool:
                    await receive(client_a, SRC, redrive=redrive(1))
                    return (await client_b.stats(1, DLQ, retention_seconds=RETENTION))["visible"] == 1

                await eventually(arrived)

    asyncio.run(scenario())
