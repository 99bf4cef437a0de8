"""Send groups held while a SEND for their queue is on its way (``ferrymq.rpc.send_groups``), on a connection
whose socket is a stand-in: the test plays the worker, answering each SEND when it chooses."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ferrymq.errors import ServiceUnavailable
from ferrymq.rpc import send_groups
from ferrymq.rpc.client import WorkerClient, WorkerConnectionLost
from ferrymq.rpc.codec import pack, unpack
from ferrymq.rpc.framing import STATUS_OK, Op, encode_frame
from tests.unit.test_worker_client_deadlines import bounded, connected

RETENTION = 345_600


def message(body: str) -> dict[str, Any]:
    return {"id": f"id-{body}", "body": body, "md5_body": "0" * 32}


def sends(writer: Any) -> list[tuple[int, list[str]]]:
    """The SENDs written so far: request id and the ids of the messages each holds."""
    out = []
    for request_id, op, payload in writer.requests():
        assert op == Op.SEND
        args = unpack(payload)
        out.append((request_id, [row[0] for row in args[2]]))
    return out


def answer(reader: asyncio.StreamReader, request_id: int, ids: list[str]) -> None:
    reader.feed_data(encode_frame(request_id, STATUS_OK, pack([[i, 1_000] for i in ids])))


async def turns(n: int = 3) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def send(client: WorkerClient, body: str) -> asyncio.Future[list[dict]]:
    return asyncio.ensure_future(client.send(0, "q", [message(body)], retention_seconds=RETENTION))


async def one_held(client: WorkerClient) -> tuple[list[asyncio.Future[list[dict]]], asyncio.Future[list[dict]]]:
    """A SEND of two messages on its way, and a send held behind it."""
    first = [send(client, f"a{i}") for i in range(2)]
    await turns()
    held = send(client, "b")
    await turns()
    return first, held


def test_sends_made_while_a_send_of_several_is_on_its_way_wait_for_it_and_go_as_one() -> None:
    async def scenario() -> None:
        client, _, reader, writer = connected(request_timeout=5)
        try:
            # given a SEND of three messages on its way (three callers in one turn)
            first = [send(client, f"a{i}") for i in range(3)]
            await turns()
            assert [ids for _, ids in sends(writer)] == [["id-a0", "id-a1", "id-a2"]]
            # when four more sends come, each in a turn of its own, before it is answered
            later = []
            for i in range(4):
                later.append(send(client, f"b{i}"))
                await turns()
            # then none of them is written yet: they wait for the SEND on its way
            assert len(sends(writer)) == 1
            # and once it is answered, its callers get their results and the four leave as one SEND
            (first_id, first_ids), = sends(writer)
            answer(reader, first_id, first_ids)
            assert [r[0]["id"] for r in await bounded(asyncio.gather(*first))] == first_ids
            await turns()
            (_, _), (second_id, second_ids) = sends(writer)
            assert second_ids == ["id-b0", "id-b1", "id-b2", "id-b3"]
            answer(reader, second_id, second_ids)
            assert [r[0]["id"] for r in await bounded(asyncio.gather(*later))] == second_ids
        finally:
            await client.close()

    asyncio.run(scenario())


def test_a_sender_alone_is_never_held() -> None:
    async def scenario() -> None:
        client, _, reader, writer = connected(request_timeout=5)
        try:
            # given a SEND of one message on its way
            one = send(client, "a")
            await turns()
            # when another send comes before it is answered
            two = send(client, "b")
            await turns()
            # then it is written at once: a SEND of one message says nothing arrives together, so no wait pays
            assert [ids for _, ids in sends(writer)] == [["id-a"], ["id-b"]]
            for request_id, ids in sends(writer):
                answer(reader, request_id, ids)
            assert (await bounded(one))[0]["id"] == "id-a" and (await bounded(two))[0]["id"] == "id-b"
        finally:
            await client.close()

    asyncio.run(scenario())


def test_a_held_group_that_is_full_leaves_at_once_and_the_next_is_held() -> None:
    async def scenario() -> None:
        client, _, reader, writer = connected(request_timeout=5)
        try:
            first = [send(client, f"a{i}") for i in range(2)]
            await turns()
            # when more sends come, one per turn, than a group holds
            later = []
            for i in range(send_groups.MAX_MESSAGES + 1):
                later.append(send(client, f"b{i}"))
                await turns(1)
            await turns()
            # then the full group left without waiting, and the one past it is held
            written = sends(writer)
            assert [len(ids) for _, ids in written] == [2, send_groups.MAX_MESSAGES]
            for request_id, ids in written:
                answer(reader, request_id, ids)
            await bounded(asyncio.gather(*first))
            await turns()
            assert [len(ids) for _, ids in sends(writer)] == [2, send_groups.MAX_MESSAGES, 1]
            request_id, ids = sends(writer)[-1]
            answer(reader, request_id, ids)
            assert len(await bounded(asyncio.gather(*later))) == send_groups.MAX_MESSAGES + 1
        finally:
            await client.close()

    asyncio.run(scenario())


def test_when_the_connection_drops_the_held_callers_fail_as_never_sent() -> None:
    async def scenario() -> None:
        client, conn, _, _ = connected(request_timeout=5)
        try:
            first, held = await one_held(client)
            # when the connection to the worker drops with the first SEND unanswered
            conn._lose("the worker went away")
            # then its callers get an unknown outcome (their dispatcher resends), and the held caller, whose SEND
            # never left and whose worker cannot be reached again, a failure that says it was not sent
            for outcome in await bounded(asyncio.gather(*first, return_exceptions=True)):
                assert isinstance(outcome, WorkerConnectionLost)
            with pytest.raises(ServiceUnavailable) as unsent:
                await bounded(held)
            assert not isinstance(unsent.value, WorkerConnectionLost)
        finally:
            await client.close()

    asyncio.run(scenario())


def test_closing_the_client_fails_its_held_callers() -> None:
    async def scenario() -> None:
        client, _, _, _ = connected(request_timeout=5)
        first, held = await one_held(client)
        await client.close()
        # then the held caller fails as never sent, as do those whose SEND the closed connection took with it
        with pytest.raises(ServiceUnavailable):
            await bounded(held)
        for outcome in await bounded(asyncio.gather(*first, return_exceptions=True)):
            assert isinstance(outcome, ServiceUnavailable)

    asyncio.run(scenario())
