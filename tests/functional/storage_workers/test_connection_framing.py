"""The worker's RPC transport on loopback, through plain sockets: frames are read however the bytes arrive (split
anywhere, several in one segment, right behind the handshake's proof), and a connection that sends something that
is not a frame, or goes away, leaves the worker serving the others."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import socket
from pathlib import Path

from ferrymq.rpc.framing import STATUS_OK, FrameDecoder, Op, encode_frame
from ferrymq.rpc.peer_auth import MAGIC, NONCE_BYTES, PROOF_BYTES, VERSION
from ferrymq.storage.server import StorageWorker, WorkerConfig
from tests.functional.storage_workers.test_peer_auth import SECRET, secured_worker
from tests.support.engine_requests import RECEIPT_KEY

PING = b"\x90"


async def _worker(data_dir: Path) -> tuple[StorageWorker, tuple[str, int]]:
    server = StorageWorker(WorkerConfig(data_dir=data_dir, partitions=(0,), register=False), {0: RECEIPT_KEY})
    return server, await server.start()


def _read_frames(sock: socket.socket, count: int) -> list[tuple[int, int, bytes]]:
    """Read until ``count`` frames came (or the worker closed: then what came)."""
    decoder, frames = FrameDecoder(), []
    while len(frames) < count:
        chunk = sock.recv(65536)
        if not chunk:
            break
        frames.extend(decoder.feed(chunk))
    return frames


def _pings_byte_by_byte(address: tuple[str, int]) -> list[tuple[int, int, bytes]]:
    with socket.create_connection(address, timeout=5.0) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = encode_frame(7, Op.PING, PING) + encode_frame(8, Op.PING, PING)
        for i in range(len(data)):
            sock.sendall(data[i : i + 1])
        return _read_frames(sock, 2)


def _pings_in_one_segment(address: tuple[str, int], count: int) -> list[tuple[int, int, bytes]]:
    with socket.create_connection(address, timeout=5.0) as sock:
        sock.sendall(b"".join(encode_frame(n, Op.PING, PING) for n in range(1, count + 1)))
        return _read_frames(sock, count)


def _garbage_then_eof(address: tuple[str, int]) -> bytes:
    """A length no frame has: the worker closes the connection without answering."""
    with socket.create_connection(address, timeout=5.0) as sock:
        sock.sendall(b"\x00\x00\x00\x01" + b"\x00" * 8)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def test_frames_split_anywhere_or_packed_together_are_each_answered_in_order(tmp_path: Path) -> None:
    async def scenario() -> None:
        server, address = await _worker(tmp_path)
        try:
            # given two PINGs sent one byte at a time, then 50 in one write
            split = await asyncio.to_thread(_pings_byte_by_byte, address)
            packed = await asyncio.to_thread(_pings_in_one_segment, address, 50)
            # then each got its answer, by request id, in order
            assert [(rid, status) for rid, status, _ in split] == [(7, STATUS_OK), (8, STATUS_OK)]
            assert [rid for rid, _, _ in packed] == list(range(1, 51))
            assert all(status == STATUS_OK for _, status, _ in packed)
        finally:
            await server.close()

    asyncio.run(scenario())


def test_a_connection_sending_no_frame_is_closed_and_the_worker_serves_the_next(tmp_path: Path) -> None:
    async def scenario() -> None:
        server, address = await _worker(tmp_path)
        try:
            # given a connection whose first bytes are not a frame
            assert await asyncio.to_thread(_garbage_then_eof, address) == b""
            # then it was closed without a word, and a new connection is served
            assert [rid for rid, _, _ in await asyncio.to_thread(_pings_in_one_segment, address, 1)] == [1]
        finally:
            await server.close()

    asyncio.run(scenario())


def _proof(label: bytes, client_nonce: bytes, server_nonce: bytes) -> bytes:
    return hmac.new(SECRET.encode(), label + client_nonce + server_nonce, hashlib.sha256).digest()


def _handshake_with_request_behind_the_proof(address: tuple[str, int]) -> tuple[bytes, list[tuple[int, int, bytes]]]:
    client_nonce = b"\x05" * NONCE_BYTES
    with socket.create_connection(address, timeout=5.0) as sock:
        sock.sendall(MAGIC + bytes([VERSION]) + client_nonce)
        server_nonce = b""
        while len(server_nonce) < NONCE_BYTES:
            server_nonce += sock.recv(NONCE_BYTES - len(server_nonce))
        # the proof and two requests in one write: the requests are read once the proof passed
        proof = _proof(b"ferrymq-rpc/1 client", client_nonce, server_nonce)
        sock.sendall(proof + encode_frame(3, Op.PING, PING) + encode_frame(4, Op.PING, PING))
        server_proof = b""
        while len(server_proof) < PROOF_BYTES:
            server_proof += sock.recv(PROOF_BYTES - len(server_proof))
        assert server_proof == _proof(b"ferrymq-rpc/1 server", client_nonce, server_nonce)
        return server_proof, _read_frames(sock, 2)


def test_requests_sent_with_the_handshake_proof_are_answered_after_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with secured_worker(tmp_path) as address:
            _, frames = await asyncio.to_thread(_handshake_with_request_behind_the_proof, address)
            assert [(rid, status) for rid, status, _ in frames] == [(3, STATUS_OK), (4, STATUS_OK)]

    asyncio.run(scenario())
