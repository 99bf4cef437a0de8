"""The deploy lane's front (ferrymq.infra.deploy_local.ApiFront): requests reach the emulator's path form of the
API with nothing but the path prefix changed and X-Forwarded-Proto added, one after another on a connection."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from ferrymq.infra.deploy_local import ApiFront


class Upstream:
    """A loopback server that records the bytes of each connection and answers every request with 200."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)
        self.port = self.server.getsockname()[1]
        self._closing = threading.Event()
        self.received: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                data = b""
                conn.settimeout(2)
                try:
                    while chunk := conn.recv(65536):
                        data += chunk
                        for _ in range(chunk.count(b"HTTP/1.1\r\n")):
                            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                except OSError:
                    pass
                self.received.append(data)

    def connections(self, count: int) -> list[bytes]:
        """The bytes of the first ``count`` connections once they have ended."""
        deadline = time.monotonic() + 10
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.received[:count]

    def close(self) -> None:
        self._closing.set()
        self._thread.join(5)
        self.server.close()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    try:
        yield server
    finally:
        server.close()


def _exchange(port: int, payload: bytes, answers: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(payload)
        got = b""
        while got.count(b"HTTP/1.1 200 OK") < answers:
            chunk = client.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def test_pipelined_requests_keep_host_and_body_and_get_the_prefix(upstream: Upstream) -> None:
    front = ApiFront(upstream.port, "abcd1234")
    port = front.start()
    try:
        first = b"POST /prod/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Length: 5\r\n\r\nhello"
        second = b"GET /prod/1/q?Action=X HTTP/1.1\r\nHost: 127.0.0.1:9\r\nX-Forwarded-Proto: https\r\n\r\n"
        assert _exchange(port, first + second, 2).count(b"200 OK") == 2
        (seen,) = upstream.connections(1)
    finally:
        front.stop()
    assert seen == (b"POST /_aws/execute-api/abcd1234/prod/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\nContent-Length: 5\r\n"
                    b"X-Forwarded-Proto: http\r\n\r\nhello"
                    b"GET /_aws/execute-api/abcd1234/prod/1/q?Action=X HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"
                    b"X-Forwarded-Proto: https\r\n\r\n")


def test_a_client_that_hangs_up_mid_body_or_sends_garbage_leaves_the_front_serving(upstream: Upstream) -> None:
    front = ApiFront(upstream.port, "abcd1234")
    port = front.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            client.sendall(b"POST /prod/ HTTP/1.1\r\nContent-Length: 100\r\n\r\nshort")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            client.sendall(b"\x00\xff garbage without a line end")
        ok = b"GET /prod/ HTTP/1.1\r\nHost: x\r\n\r\n"
        assert b"200 OK" in _exchange(port, ok, 1)
    finally:
        front.stop()


def test_an_emulator_that_is_gone_closes_the_connection() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    front = ApiFront(dead, "abcd1234")
    port = front.start()
    try:
        assert _exchange(port, b"GET /prod/ HTTP/1.1\r\nHost: x\r\n\r\n", 1) == b""
    finally:
        front.stop()
