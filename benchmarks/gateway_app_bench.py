"""CPU the gateway's ASGI layer adds per request: headers, the transport limits and the credential pre-check.

    python benchmarks/gateway_app_bench.py

The app from :func:`ferrymq.frontend.asgi.create_app` wraps a front end whose ``handle`` answers at once, so
what is timed is the ASGI layer alone: building the request, checking the size and the per-client flag,
``identify`` for bodies over the free 64 KiB (the SigV4 header parsed and the key found in the warm cache of a
real :class:`Authenticator`),
reading the body against the budget, and sending the answer. Bodies of 256 B (a small SendMessage) and of
200 KiB (past the free allowance, so charged to the budget). It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import uvloop
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ferrymq.aws.credentials import Credential
from ferrymq.clock import SystemClock
from ferrymq.frontend.asgi import create_app
from ferrymq.frontend.auth import Authenticator
from ferrymq.frontend.http import HttpRequest
from ferrymq.protocol.responses import HttpResponse, render_error
from ferrymq.settings import Settings

HOST = "127.0.0.1:9324"


class MemoryStore:
    """The one key the benchmark signs with; the version never moves."""

    def __init__(self) -> None:
        self.key = Credential("bench", "bench-secret", "000000000000", "bench")

    def get(self, access_key_id: str) -> Credential | None:
        return self.key if access_key_id == self.key.access_key_id else None

    def version(self) -> int:
        return 1


class ImmediateFrontend:
    """Identifies with a real Authenticator, then answers without running an action."""

    metrics = None

    def __init__(self, authenticator: Authenticator) -> None:
        self._auth = authenticator
        self._ok = HttpResponse(200, [("content-type", "application/x-amz-json-1.0")], b"{}")

    async def identify(self, request: HttpRequest) -> None:
        await self._auth.identify(request)

    def refuse(self, request: HttpRequest, error: Any) -> HttpResponse:
        return render_error("json", error, "bench")

    async def handle(self, request: HttpRequest) -> HttpResponse:
        if request.on_authenticated is not None:
            request.on_authenticated()
        return self._ok

    async def close(self) -> None:
        pass


def _scope_and_body(size: int) -> tuple[dict[str, Any], bytes]:
    body = b'{"QueueUrl":"q","MessageBody":"' + b"x" * size + b'"}'
    request = AWSRequest(method="POST", url=f"http://{HOST}/", data=body, headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"})
    SigV4Auth(Credentials("bench", "bench-secret"), "sqs", "us-east-1").add_auth(request)
    headers = [(k.lower().encode(), v.encode() if isinstance(v, str) else v) for k, v in request.headers.items()]
    headers += [(b"host", HOST.encode()), (b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "method": "POST", "path": "/", "raw_path": b"/", "query_string": b"",
             "headers": headers, "scheme": "http", "client": ("127.0.0.1", 50000)}
    return scope, body


async def cpu_per_request(app: Any, scope: dict[str, Any], body: bytes, total: int) -> float:
    # Bodies arrive from uvicorn in chunks of up to 64 KiB.
    chunks = [body[i:i + 65536] for i in range(0, len(body), 65536)] or [b""]

    async def send(message: Any) -> None:
        pass

    async def one() -> None:
        pending = iter(range(len(chunks)))

        async def receive() -> dict[str, Any]:
            index = next(pending)
            return {"type": "http.request", "body": chunks[index], "more_body": index < len(chunks) - 1}

        await app(scope, receive, send)

    for _ in range(200):
        await one()
    started = time.process_time()
    for _ in range(total):
        await one()
    return (time.process_time() - started) / total * 1e6


async def run(total: int) -> None:
    clock = SystemClock()
    authenticator = Authenticator(MemoryStore(), clock, ttl=300, max_skew_seconds=900,  # type: ignore[arg-type]
                                  regions=frozenset({"us-east-1"}))
    app = create_app(Settings(), ImmediateFrontend(authenticator))  # type: ignore[arg-type]
    for label, size in (("SendMessage, 256 B", 256), ("SendMessage, 200 KiB", 200 * 1024)):
        scope, body = _scope_and_body(size)
        micros = await cpu_per_request(app, scope, body, total)
        print(f"ASGI layer, {label:<22} {micros:8.1f} µs per request")
    scope, _ = _scope_and_body(256)
    request = HttpRequest("POST", "/", "", {k.decode(): v.decode() for k, v in scope["headers"]}, b"")
    started = time.process_time()
    for _ in range(total):
        await authenticator.identify(request)
    micros = (time.process_time() - started) / total * 1e6
    print(f"identify alone (bodies over 64 KiB)  {micros:8.1f} µs per request")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    args = parser.parse_args()
    # The loop the gateway runs on.
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run(args.requests))


if __name__ == "__main__":
    main()
