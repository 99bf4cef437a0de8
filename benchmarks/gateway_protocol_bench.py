"""CPU per request of the gateway's HTTP protocol alone, in process: no sockets, no front end.

    python benchmarks/gateway_protocol_bench.py

Connections of the gateway's protocol class (``guarded_protocol``, on the gateway's uvicorn configuration) are
given a stand-in transport and fed a signed SendMessage each per loop turn, as uvloop would hand them over; the
front end's direct entry answers at once with a canned result. What is timed is the protocol's own Python per
request: parsing and its callbacks, the direct way's cycle and task, the front end's request and the answer
written. ``bare`` is the least such a protocol does (an ``asyncio.Protocol`` on httptools: parse, a request, a
task, the answer written), the floor for comparison. It prints the best and median of the repetitions, and
asserts nothing. With the HTTP layer's sockets: ``gateway_http_bench.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from typing import Any

import httptools
import uvicorn
import uvloop
from sqs_bench import Target, signed
from uvicorn.server import ServerState

from ferrymq.frontend.asgi import Gateway
from ferrymq.frontend.http import HttpRequest, headers_of
from ferrymq.infra.http_protocol import guarded_protocol
from ferrymq.protocol.responses import HttpResponse, render_result

ANSWER = render_result("json", "SendMessage", {"MD5OfMessageBody": "0" * 32, "MessageId": "0" * 36}, "0" * 36)


class StandInTransport(asyncio.Transport):
    """Counts what is written; never pauses, never closes on its own."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 9324), "peername": ("127.0.0.1", 40000)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes += 1

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


async def answer_read(request: HttpRequest) -> HttpResponse:
    return ANSWER


async def asgi_app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("every request here is answered directly")


class BareProtocol(asyncio.Protocol):
    """The floor: what any protocol answering these requests must do."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport
        self.parser = httptools.HttpRequestParser(self)
        self.loop = asyncio.get_running_loop()
        self.tasks: set[asyncio.Task[None]] = set()

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_begin(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.body = b""

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        parsed = httptools.parse_url(self.url)
        request = HttpRequest(
            "POST",
            parsed.path.decode(),
            (parsed.query or b"").decode(),
            headers_of(self.headers),
            self.body,
            "http",
            "127.0.0.1",
        )
        task = self.loop.create_task(self._answer(request))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _answer(self, request: HttpRequest) -> None:
        response = await answer_read(request)
        out = [b"HTTP/1.1 200 OK\r\n"]
        for name, value in response.headers:
            out += (name.encode("latin-1").lower(), b": ", value.encode("latin-1"), b"\r\n")
        out += (b"content-length: ", str(len(response.body)).encode(), b"\r\n\r\n", response.body)
        self.transport.write(b"".join(out))


def gateway_protocols(count: int) -> list[asyncio.Protocol]:
    gateway = Gateway(asgi_app, answer_read, lambda path: True, 64 * 1024, 10.0, lambda head: ANSWER)
    protocol_class = guarded_protocol(10.0, count, gateway)
    config = uvicorn.Config(
        asgi_app,
        loop="uvloop",
        http=protocol_class,
        ws="none",
        lifespan="off",
        access_log=False,
        log_config=None,
        log_level="warning",
        server_header=False,
        proxy_headers=False,
        interface="asgi3",
    )
    config.load()
    state = ServerState()
    return [protocol_class(config=config, server_state=state, app_state={}) for _ in range(count)]


async def per_request(kind: str, connections: int, turns: int, repeats: int) -> list[float]:
    protocols = gateway_protocols(connections) if kind == "gateway" else [BareProtocol() for _ in range(connections)]
    transports = [StandInTransport() for _ in protocols]
    for protocol, transport in zip(protocols, transports, strict=True):
        protocol.connection_made(transport)
    head, body = signed(
        Target("http://127.0.0.1:9324", "test", "test", "us-east-1"),
        "SendMessage",
        {"QueueUrl": "http://127.0.0.1:9324/000000000000/q", "MessageBody": "x" * 100},
    )
    data = head + body
    figures = []
    for _ in range(repeats):
        started = time.process_time()
        for _ in range(turns):
            for protocol in protocols:
                protocol.data_received(data)  # type: ignore[attr-defined]
            # The answers' tasks run, then their done callbacks.
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        figures.append((time.process_time() - started) / (turns * connections) * 1e6)
    for protocol in protocols:
        protocol.connection_lost(None)
    if sum(t.writes for t in transports) != turns * repeats * connections:
        raise SystemExit(f"{kind}: not every request was answered")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--turns", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    gc.freeze()  # as the gateway does once started (ferrymq.collector)
    for kind in ("gateway", "bare"):
        figures = uvloop.run(per_request(kind, args.connections, args.turns, args.repeats))
        print(f"{kind:<8} {min(figures):6.2f} µs/request best, median {statistics.median(figures):6.2f}")


if __name__ == "__main__":
    main()
