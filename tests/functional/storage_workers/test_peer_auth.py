"""The worker RPC's cluster-secret handshake on loopback: a connection without the secret gets nothing, a wrong
secret is refused in both directions, and with it requests and replication work as before."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from ferrymq.errors import ServiceUnavailable
from ferrymq.replication_rules import Acks
from ferrymq.rpc.client import WorkerClient, WorkerUnreachable
from ferrymq.rpc.framing import Op, encode_frame
from ferrymq.rpc.peer_auth import HELLO_BYTES, MAGIC, NONCE_BYTES, VERSION, PeerAuth
from ferrymq.storage.replication import FollowerRole, LeaderRole
from ferrymq.storage.server import StorageWorker, WorkerConfig
from tests.functional.storage_workers.test_server import message, receive
from tests.functional.storage_workers.worker_calls import RETENTION, eventually
from tests.support.engine_requests import RECEIPT_KEY

SECRET = "the-cluster-secret"
# Short, so a silent connection is dropped within the test.
HANDSHAKE_SECONDS = 0.5


def auth(secret: str = SECRET) -> PeerAuth:
    return PeerAuth(secret, timeout=HANDSHAKE_SECONDS)


@asynccontextmanager
async def secured_worker(data_dir: Path, worker_id: str = "w", **fields: object) -> AsyncIterator[tuple[str, int]]:
    async with secured_server(data_dir, worker_id, **fields) as (_, address):
        yield address


@asynccontextmanager
async def secured_server(data_dir: Path, worker_id: str = "w",
                         **fields: object) -> AsyncIterator[tuple[StorageWorker, tuple[str, int]]]:
    config = WorkerConfig(data_dir=data_dir, worker_id=worker_id, partitions=(0,), register=False,
                          peer_auth=auth(), **fields)  # type: ignore[arg-type]
    server = StorageWorker(config, {0: RECEIPT_KEY})
    address = await server.start()
    try:
        yield server, address
    finally:
        await server.close()


def raw_exchange(address: tuple[str, int], sent: bytes, wait: float = 5.0) -> bytes:
    """Send ``sent`` on a plain socket and collect everything the worker sends until it closes."""
    with socket.create_connection(address, timeout=wait) as sock:
        if sent:
            sock.sendall(sent)
        received = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return received
            received += chunk


def test_a_raw_request_without_the_handshake_gets_nothing_and_the_connection_is_closed(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with secured_worker(tmp_path) as address:
            # given a frame a client without the secret would send (a PING, then a RECEIVE for queue "q")
            frames = encode_frame(1, Op.PING, b"\x90") + encode_frame(2, Op.RECEIVE, b"\x96\x00\xa1q\x0a\x1e\x00\x00")
            # when it is sent raw, then the worker closes the connection without sending a single byte
            assert await asyncio.to_thread(raw_exchange, address, frames) == b""

    asyncio.run(scenario())


def test_a_silent_connection_is_closed_without_a_byte(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with secured_worker(tmp_path) as address:
            assert await asyncio.to_thread(raw_exchange, address, b"") == b""

    asyncio.run(scenario())


def test_a_forged_proof_gets_only_the_servers_nonce(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with secured_worker(tmp_path) as address:
            # given a client that speaks the handshake but cannot compute the proof
            hello = MAGIC + bytes([VERSION]) + b"\x01" * NONCE_BYTES
            assert len(hello) == HELLO_BYTES
            received = await asyncio.to_thread(raw_exchange, address, hello + b"\x00" * 32 + encode_frame(1, Op.PING,
                                                                                                          b"\x90"))
            # then it gets the server's random nonce and nothing else: no proof, no reply to its request
            assert len(received) == NONCE_BYTES

    asyncio.run(scenario())


def test_a_client_with_a_wrong_secret_or_none_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with secured_worker(tmp_path) as address:
            wrong = WorkerClient(*address, connect_timeout=1.0, request_timeout=2.0, auth=auth("not-the-secret"))
            with pytest.raises(WorkerUnreachable, match="does not share this cluster secret"):
                await wrong.ping()
            await wrong.close()
            # a client without a secret gets no answer: its frames are not a handshake
            plain = WorkerClient(*address, connect_timeout=1.0, request_timeout=2.0)
            with pytest.raises(ServiceUnavailable):
                await plain.ping()
            await plain.close()

    asyncio.run(scenario())


def test_a_client_refuses_a_worker_that_does_not_hold_the_secret(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a worker of another cluster (another secret) on the address the client was given
        config = WorkerConfig(data_dir=tmp_path, partitions=(0,), register=False, peer_auth=auth("other-cluster"))
        server = StorageWorker(config, {0: RECEIPT_KEY})
        address = await server.start()
        try:
            client = WorkerClient(*address, connect_timeout=1.0, request_timeout=2.0, auth=auth())
            # then the client sends it no request
            with pytest.raises(WorkerUnreachable):
                await client.send(0, "q", [message("secret body")], retention_seconds=RETENTION)
            await client.close()
        finally:
            await server.close()

    asyncio.run(scenario())


def test_with_the_secret_requests_work_over_one_authenticated_connection(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with secured_worker(tmp_path) as address:
            client = WorkerClient(*address, connect_timeout=1.0, request_timeout=2.0, auth=auth())
            try:
                await client.send(0, "q", [message("kept")], retention_seconds=RETENTION)
                got = await receive(client, "q")
                assert [m["body"] for m in got] == ["kept"]
                assert (await client.ping())["worker_id"] == "w"
            finally:
                await client.close()

    asyncio.run(scenario())


def test_a_follower_replicates_from_its_leader_through_the_handshake(tmp_path: Path) -> None:
    async def scenario() -> None:
        leads = LeaderRole(replicas=("leader", "follower"), acks=Acks.ALL)
        async with secured_server(tmp_path / "l", "leader", leads={0: leads}) as (leader, address):
            follows = FollowerRole(leader=address, retry_seconds=0.05)
            async with secured_server(tmp_path / "f", "follower", follows={0: follows}) as (follower, _):
                client = WorkerClient(*address, connect_timeout=1.0, request_timeout=5.0, auth=auth())
                try:
                    # acks=all: answered only once the follower, fetching over an authenticated link, has it
                    await client.send(0, "q", [message("replicated")], retention_seconds=RETENTION)
                    replica, source = follower.replicas[0], leader.replicas[0]
                    assert replica.follower is not None and replica.follower.fetches > 0

                    async def same_end() -> bool:
                        return (replica.log is not None and source.log is not None
                                and replica.log.end_offset == source.log.end_offset > 0)

                    await eventually(same_end)
                finally:
                    await client.close()

    asyncio.run(scenario())
