"""The worker RPC in one process: a real StorageWorker on loopback, driven through WorkerClient."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from ferrymq.errors import InvalidAction, InvalidParameterValue, ServiceUnavailable
from ferrymq.rpc.client import WorkerClient
from ferrymq.rpc.framing import Op
from ferrymq.storage.log.lock import DirectoryInUse
from ferrymq.storage.server import StorageWorker, WorkerConfig
from tests.functional.storage_workers.in_process import worker
from tests.functional.storage_workers.worker_calls import RETENTION
from tests.support.engine_requests import RECEIPT_KEY


def message(body: str = "hello", delay: int = 0) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "body": body,
        "attrs": {},
        "md5_body": "md5",
        "md5_attrs": None,
        "delay": delay,
        "system": {},
    }


async def receive(
    client: WorkerClient, queue: str, *, wait: float = 0, n: int = 10, visibility: int = 30
) -> list[dict]:
    return await client.receive(0,
        queue, max_messages=n, visibility_timeout=visibility, wait_seconds=wait, retention_seconds=RETENTION
    )


def test_a_long_poll_does_not_hold_up_other_requests_on_the_connection(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            # given a long poll waiting on an empty queue
            poll = asyncio.ensure_future(receive(client, "empty", wait=2))
            await asyncio.sleep(0.05)
            # when other requests go over the same client
            await client.send(0, "busy", [message("x")], retention_seconds=RETENTION)
            got = await receive(client, "busy")
            # then they are answered while the long poll is still waiting, not after it
            assert [m["body"] for m in got] == ["x"]
            assert not poll.done()
            # and the long poll ends empty when its time is up
            assert await poll == []

    asyncio.run(scenario())


@pytest.mark.parametrize("trigger", ["send", "visibility-zero", "delay-over", "visibility-over"])
def test_a_long_poll_returns_as_soon_as_a_message_is_available(tmp_path: Path, trigger: str) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            q = "q"
            # given a queue with nothing visible yet: empty, or its message delayed or in flight
            if trigger == "visibility-zero":
                await client.send(0, q, [message()], retention_seconds=RETENTION)
                handle = (await receive(client, q, visibility=600))[0]["receipt"]
            elif trigger == "delay-over":
                await client.send(0, q, [message(delay=1)], retention_seconds=RETENTION)
            elif trigger == "visibility-over":
                await client.send(0, q, [message()], retention_seconds=RETENTION)
                await receive(client, q, visibility=1)
            # and a marker: a long poll of the same length on a queue nothing reaches, started first, so that
            # it ends before the poll under test would end by running out of time
            marker = asyncio.ensure_future(receive(client, "quiet", wait=10))
            poll = asyncio.ensure_future(receive(client, q, wait=10))
            await asyncio.sleep(0.3)
            # when a message becomes available (sent, made visible, or its delay or visibility timeout over)
            if trigger == "send":
                await client.send(0, q, [message()], retention_seconds=RETENTION)
            elif trigger == "visibility-zero":
                assert await client.change_visibility(0, q, [(handle, 0)]) == [None]
            # then the poll returns it while the marker is still waiting: the message ended the poll, not its time
            got = await poll
            assert len(got) == 1
            assert not marker.done()
            # and the marker, too, is answered by a message rather than by its time
            await client.send(0, "quiet", [message("for the marker")], retention_seconds=RETENTION)
            assert [m["body"] for m in await marker] == ["for the marker"]

    asyncio.run(scenario())


def test_many_concurrent_requests_share_syncs(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (server, client):
            batches = server.replicas[0].log.batches
            results = await asyncio.gather(
                *(client.send(0, "q", [message(str(i))], retention_seconds=RETENTION) for i in range(300))
            )
            assert len(results) == 300
            assert server.replicas[0].log.batches - batches < 100
            stats = await client.stats(0, "q", retention_seconds=RETENTION)
            assert stats == {"visible": 300, "in_flight": 0, "delayed": 0}

    asyncio.run(scenario())


def test_worker_errors_are_raised_as_ferrymq_errors(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            with pytest.raises(InvalidParameterValue):
                await client._call(Op.SEND, ["q", "not a list", RETENTION])
            with pytest.raises(InvalidAction):
                await client._call(99, [])
            # and the connection is still good afterwards
            assert (await client.ping())["worker_id"] == "worker-1"

    asyncio.run(scenario())


def test_unreachable_worker_is_service_unavailable(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path) as (_, client):
            port = client.port
        client = WorkerClient("127.0.0.1", port, connect_timeout=1.0)
        with pytest.raises(ServiceUnavailable):
            await client.ping()

    asyncio.run(scenario())


def test_outstanding_requests_fail_when_the_worker_goes_and_the_next_call_reconnects(tmp_path: Path) -> None:
    async def scenario() -> None:
        server = StorageWorker(WorkerConfig(data_dir=tmp_path, register=False), {0: RECEIPT_KEY})
        host, port = await server.start()
        client = WorkerClient(host, port)
        await client.send(0, "q", [message("kept")], retention_seconds=RETENTION)
        # given a long poll outstanding when the worker shuts down
        poll = asyncio.ensure_future(receive(client, "empty", wait=10))
        await asyncio.sleep(0.05)
        await server.close()
        # then it fails as ServiceUnavailable
        with pytest.raises(ServiceUnavailable):
            await asyncio.wait_for(poll, 5)
        # and once a worker is back on that port with the same log, the same client carries on
        async with worker(tmp_path, port=port):
            got = await receive(client, "q")
            assert [m["body"] for m in got] == ["kept"]
        await client.close()

    asyncio.run(scenario())


def test_a_data_directory_serves_one_worker_at_a_time(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with worker(tmp_path):
            with pytest.raises(DirectoryInUse, match="in use"):
                StorageWorker(WorkerConfig(data_dir=tmp_path, register=False), {0: RECEIPT_KEY}).open()

    asyncio.run(scenario())


def test_a_long_poll_on_a_drained_queue_sleeps_instead_of_spinning(tmp_path: Path) -> None:
    async def scenario() -> int:
        async with worker(tmp_path) as (server, client):
            # given a queue whose only message was received for 1 s and deleted, and that deadline has passed
            await client.send(0, "q", [message()], retention_seconds=RETENTION)
            got = await receive(client, "q", visibility=1)
            await client.delete(0, "q", [got[0]["receipt"]])
            await asyncio.sleep(1.1)
            # (every receive, short or long, looks at the queue through Engine.poll: count the looks)
            calls = 0
            real_poll = server.replicas[0].engine.poll

            def counting_poll(*args: Any, **kwargs: Any) -> Any:
                nonlocal calls
                calls += 1
                return real_poll(*args, **kwargs)

            server.replicas[0].engine.poll = counting_poll  # type: ignore[method-assign]
            # when a long poll waits on it
            assert await receive(client, "q", wait=1.5) == []
            return calls

    # then the worker looked exactly twice: when the poll arrived and when its time ran out, not every millisecond
    assert asyncio.run(scenario()) == 2
