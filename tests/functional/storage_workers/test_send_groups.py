"""Plain sends to one queue made in one event-loop turn go to a real worker as one SEND, each caller getting the
results of its own messages, or the error its own SEND would have got."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ferrymq.errors import InternalError, InvalidParameterValue, NotLeader, ServiceUnavailable
from ferrymq.rpc import send_groups
from ferrymq.rpc.client import WorkerClient, WorkerConnectionLost
from tests.functional.storage_workers.in_process import worker
from tests.functional.storage_workers.test_server import message
from tests.functional.storage_workers.worker_calls import RETENTION, drain


def test_sends_of_one_turn_go_as_one_send_and_each_caller_gets_its_own_results(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (server, client):
            await client.ping()  # connected: the sends below are made in one turn
            requests = server.requests
            # given ten callers sending at once, one of them two messages
            sent = [[message(f"m{i}")] for i in range(9)] + [[message("a"), message("b")]]
            results = await asyncio.gather(*(client.send(0, "q", batch, retention_seconds=RETENTION) for batch in sent))
            # then the worker took one request for all eleven messages
            assert server.requests - requests == 1
            # and each caller got the ids of its own messages, in order
            for batch, result in zip(sent, results, strict=True):
                assert [r["id"] for r in result] == [m["id"] for m in batch]
                assert all(isinstance(r["sent_ts"], int) for r in result)
            assert sorted(m["body"] for m in await drain(client, "q")) == sorted(
                m["body"] for batch in sent for m in batch
            )

    asyncio.run(scenario())


def test_a_group_holds_at_most_its_limit_and_queues_and_retentions_never_mix(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (server, client):
            await client.ping()
            requests = server.requests
            over = send_groups.MAX_MESSAGES + 4
            calls = [client.send(0, "q", [message(f"q{i}")], retention_seconds=RETENTION) for i in range(over)]
            calls.append(client.send(0, "other", [message("o")], retention_seconds=RETENTION))
            calls.append(client.send(0, "q", [message("short")], retention_seconds=60))
            await asyncio.gather(*calls)
            # two SENDs for q's messages at the default retention, one for the other queue, one for the other
            # retention
            assert server.requests - requests == 4
            assert len(await drain(client, "q")) == over + 1
            assert [m["body"] for m in await drain(client, "other")] == ["o"]

    asyncio.run(scenario())


def test_every_caller_of_a_group_gets_the_workers_refusal(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            await client.ping()
            # given sends for a partition this worker does not serve
            outcomes = await asyncio.gather(
                *(client.send(7, "q", [message(str(i))], retention_seconds=RETENTION) for i in range(5)),
                return_exceptions=True,
            )
            # then each caller gets NotLeader, as its own SEND would have
            assert [type(o) for o in outcomes] == [NotLeader] * 5
            assert len({id(o) for o in outcomes}) == 5, "each caller raises an exception of its own"

    asyncio.run(scenario())


def test_a_malformed_message_is_refused_for_the_group_and_nothing_of_it_is_stored(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            await client.ping()
            hostile = message("bad")
            hostile["delay"] = "not a number"
            outcomes = await asyncio.gather(
                client.send(0, "q", [message("fine")], retention_seconds=RETENTION),
                client.send(0, "q", [hostile], retention_seconds=RETENTION),
                return_exceptions=True,
            )
            assert [type(o) for o in outcomes] == [InvalidParameterValue, InvalidParameterValue]
            assert await drain(client, "q") == []
            # and the client and the worker go on serving
            await client.send(0, "q", [message("after")], retention_seconds=RETENTION)
            assert [m["body"] for m in await drain(client, "q")] == ["after"]

    asyncio.run(scenario())


def test_callers_of_a_group_whose_worker_goes_get_an_unknown_outcome(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (server, client):
            await client.ping()
            # given a group of sends whose worker stops before answering (its replies wait on a commit that the
            # stop abandons)
            sends = [asyncio.ensure_future(client.send(0, "q", [message(str(i))], retention_seconds=RETENTION))
                     for i in range(3)]
            await asyncio.sleep(0)
            await server.close()
            outcomes = await asyncio.gather(*sends, return_exceptions=True)
        # then each caller either got its results or a ServiceUnavailable its dispatcher retries with the resend
        # flag (the connection was lost with the request on it)
        for outcome in outcomes:
            assert isinstance(outcome, list | ServiceUnavailable), outcome

    asyncio.run(scenario())


def test_a_group_whose_first_caller_cannot_connect_fails_every_caller_as_never_sent(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            port = client.port
        unreachable = WorkerClient("127.0.0.1", port, connect_timeout=1.0)
        outcomes = await asyncio.gather(
            *(unreachable.send(0, "q", [message(str(i))], retention_seconds=RETENTION) for i in range(3)),
            return_exceptions=True,
        )
        assert all(isinstance(o, ServiceUnavailable) and not isinstance(o, WorkerConnectionLost) for o in outcomes)
        await unreachable.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("fifo", [True, False])
def test_fifo_sends_and_resends_go_one_send_each(tmp_path: Path, fifo: bool) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (server, client):
            await client.ping()
            requests = server.requests

            def one(i: int) -> list[dict]:
                m = message(str(i))
                if fifo:
                    m.update(group="g", dedup_id=f"d{i}")
                return [m]

            await asyncio.gather(*(client.send(0, "f" if fifo else "q", one(i), retention_seconds=RETENTION,
                                               fifo=fifo, resend=not fifo) for i in range(3)))
            assert server.requests - requests == 3

    asyncio.run(scenario())


def test_a_group_that_cannot_be_encoded_fails_its_callers_at_once_and_the_connection_serves_on(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            await client.ping()
            unencodable = message("x")
            unencodable["attrs"] = {"a": {1, 2}}  # a set: msgpack has no form for it
            outcomes = await asyncio.wait_for(asyncio.gather(
                client.send(0, "q", [message("fine")], retention_seconds=RETENTION),
                client.send(0, "q", [unencodable], retention_seconds=RETENTION),
                return_exceptions=True,
            ), 2)  # failed when written, not at the request deadline (5 s)
            assert [type(o) for o in outcomes] == [InternalError, InternalError]
            await client.send(0, "q", [message("after")], retention_seconds=RETENTION)
            assert [m["body"] for m in await drain(client, "q")] == ["after"]

    asyncio.run(scenario())
