"""HTTP front of the stand-in: an ASGI app that hands each request to :class:`DurableApp` on a thread pool.

Serving through uvicorn (httptools, uvloop) instead of werkzeug's development server keeps connections
alive between AWS calls; werkzeug closes every one. The WSGI environ is built the way moto's own request
handler builds it, including the original spelling of ``x-amz-meta-*`` headers with underscores.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from moto.core.request import (
    PRESERVED_HEADER_NAMES_ENVIRON_KEY,
    environ_key_for_header,
    should_preserve_original_header_name,
)

from ferrymq.infra.standin.durable_app import DurableApp, Response
from ferrymq.infra.standin.request_auth import RequestVerifier

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# The body reaches moto whole, with a Content-Length, so connection-level framing does not apply.
_HOP_BY_HOP = frozenset({"transfer-encoding", "connection", "keep-alive"})


def build_environ(scope: Scope) -> dict[str, Any]:
    """moto's WSGI environ for an ASGI HTTP ``scope``, less ``wsgi.input`` and ``CONTENT_LENGTH``."""
    raw_path: bytes = scope.get("raw_path") or scope["path"].encode("utf-8")
    query: str = scope.get("query_string", b"").decode("latin-1")
    raw_uri = raw_path.decode("latin-1") + (f"?{query}" if query else "")
    server_host, server_port = scope.get("server") or ("127.0.0.1", 0)
    client = scope.get("client") or ("127.0.0.1", 0)
    environ: dict[str, Any] = {
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": "",
        "PATH_INFO": scope["path"].encode("utf-8").decode("latin-1"),
        "QUERY_STRING": query,
        "RAW_URI": raw_uri,
        "REQUEST_URI": raw_uri,
        "SERVER_NAME": str(server_host),
        "SERVER_PORT": str(server_port),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "REMOTE_ADDR": str(client[0]),
    }
    preserved: dict[str, str] = {}
    underscored: list[tuple[str, str]] = []
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1")
        if name.lower() in _HOP_BY_HOP:
            continue
        value = raw_value.decode("latin-1")
        if "_" in name:
            # WSGI cannot tell X_Foo from X-Foo, so underscored names are dropped, except S3 user metadata.
            if should_preserve_original_header_name(name):
                underscored.append((name, value))
            continue
        key = environ_key_for_header(name)
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    for name, value in underscored:
        key = environ_key_for_header(name)
        if key in environ and key not in preserved:
            continue  # never let an underscored header stand in for a dashed one
        preserved.setdefault(key, name)
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    environ[PRESERVED_HEADER_NAMES_ENVIRON_KEY] = preserved
    return environ


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


class StandinAsgiApp:
    """ASGI app running every request through ``durable`` on ``executor`` (moto's code blocks), once ``verifier``
    has found it signed with the stand-in's key pair."""

    def __init__(self, durable: DurableApp, executor: ThreadPoolExecutor, verifier: RequestVerifier) -> None:
        self._durable = durable
        self._executor = executor
        self._verifier = verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await _read_body(receive)
        refusal = self._verifier.check(scope, body)
        if refusal is not None:
            await send({"type": "http.response.start", "status": refusal.status, "headers": refusal.headers})
            await send({"type": "http.response.body", "body": refusal.body})
            return
        environ = build_environ(scope)
        loop = asyncio.get_running_loop()
        response: Response = await loop.run_in_executor(self._executor, self._durable.handle, environ, body)
        status = int(response.status.split(" ", 1)[0])
        headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in response.headers]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"".join(response.body)})


def dynamodb_environ(action: str, *, region: str, access_key: str, account: str | None = None) -> dict[str, Any]:
    """The WSGI environ of a DynamoDB ``action`` made inside the stand-in, built the way its HTTP front builds a
    client's. Unsigned as far as moto cares: the credential scope tells its dispatcher service and region, and
    ``account`` (moto's own header) whose table it is; None means moto's default account."""
    credential = f"{access_key}/20000101/{region}/dynamodb/aws4_request"
    headers = [
        (b"host", b"dynamodb.standin"),
        (b"content-type", b"application/x-amz-json-1.0"),
        (b"x-amz-target", f"DynamoDB_20120810.{action}".encode()),
        (b"authorization", f"AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders=host, Signature=0".encode()),
    ]
    if account is not None:
        headers.append((b"x-moto-account-id", account.encode()))
    scope = {"type": "http", "method": "POST", "path": "/", "raw_path": b"/", "query_string": b"", "headers": headers}
    return build_environ(scope)
