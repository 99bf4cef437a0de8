"""The front end as a raw ASGI application, for the local gateway (uvicorn with httptools and uvloop).

Raw ASGI rather than a framework: the pipeline does its own routing, and every microsecond here is on
the hot path of every request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ferrymq.settings import Settings
from functions.frontend.http import HttpRequest
from functions.frontend.pipeline import Frontend
from functions.frontend.wiring import build_frontend

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# A batch of ten 1 MiB-total messages, base64 and form encoding included, fits well below this.
MAX_BODY_BYTES = 8 * 1024 * 1024


def create_app(settings: Settings, frontend: Frontend | None = None) -> ASGIApp:
    state: dict[str, Frontend] = {}

    def get_frontend() -> Frontend:
        if "frontend" not in state:
            state["frontend"] = frontend or build_frontend(settings)
        return state["frontend"]

    async def lifespan(receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                get_frontend()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if "frontend" in state:
                    await state["frontend"].close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                await _plain(send, 413, b"Request entity too large")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            headers[name] = f"{headers[name]},{value}" if name in headers else value
        raw_path = scope.get("raw_path")
        request = HttpRequest(
            method=scope["method"],
            path=raw_path.decode("latin-1") if raw_path else scope["path"],
            query_string=scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            body=b"".join(chunks),
            scheme=scope.get("scheme", "http"),
            peer=scope["client"][0] if scope.get("client") else None,
        )
        response = await get_frontend().handle(request)
        await send(
            {
                "type": "http.response.start",
                "status": response.status,
                "headers": [
                    *((k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers),
                    (b"content-length", str(len(response.body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": response.body})

    return app


async def _plain(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})
