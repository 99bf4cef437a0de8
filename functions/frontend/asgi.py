"""The front end as a raw ASGI application, for the local gateway (uvicorn with httptools and uvloop).

Raw ASGI rather than a framework: the pipeline does its own routing, and every microsecond here is on
the hot path of every request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ferrymq.errors import ServiceUnavailable, SqsError
from ferrymq.frontend import health
from ferrymq.frontend.dashboard.service import Dashboard
from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.pipeline import Frontend
from ferrymq.frontend.transport_limits import (
    FREE_BYTES,
    OVER_CLIENT_CAP,
    BodyLease,
    BufferBudget,
    ClientGone,
    declared_length,
    read_body,
    too_large,
)
from ferrymq.frontend.wiring import build_frontend
from ferrymq.protocol.responses import HttpResponse
from ferrymq.settings import Settings

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def create_app(settings: Settings, frontend: Frontend | None = None) -> ASGIApp:
    """The front end for an ASGI server, with the transport limits of functions/frontend/transport_limits.py."""
    state: dict[str, Frontend] = {}
    budget = BufferBudget(settings.unauthenticated_buffer_bytes)

    def get_frontend() -> Frontend:
        if "frontend" not in state:
            state["frontend"] = frontend or build_frontend(settings)
        return state["frontend"]

    dashboards: dict[str, Dashboard] = {}

    def get_dashboard() -> Dashboard | None:
        if not settings.dashboard_enabled:
            return None
        if "dashboard" not in dashboards:
            built = get_frontend()
            dashboards["dashboard"] = Dashboard(built.services, built.authenticator, built.recent_errors,
                                                built.metrics)
        return dashboards["dashboard"]

    async def lifespan(receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                get_frontend().start()
                if (dashboard := get_dashboard()) is not None:
                    dashboard.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if "dashboard" in dashboards:
                    await dashboards["dashboard"].close()
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
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            headers[name] = f"{headers[name]},{value}" if name in headers else value
        raw_path = scope.get("raw_path")
        lease = BodyLease(budget)
        head = HttpRequest(
            method=scope["method"],
            path=raw_path.decode("latin-1") if raw_path else scope["path"],
            query_string=scope.get("query_string", b"").decode("latin-1"),
            headers=headers,
            body=b"",
            scheme=scope.get("scheme", "http"),
            peer=scope["client"][0] if scope.get("client") else None,
            on_authenticated=lease.release,
        )
        frontend = get_frontend()
        if health.is_health_check(head.method, head.path, head.query_string, headers):
            await _send(send, await health.answer(head.path, frontend.services))
            return
        if Dashboard.serves(head.path) and (dashboard := get_dashboard()) is not None:
            await _send(send, await dashboard.answer(head, receive))
            return
        metrics = frontend.metrics
        if metrics is not None and metrics.serves(head.method, head.path, head.query_string, headers):
            await _send(send, await metrics.answer())
            return
        try:
            try:
                body = await _read_request(scope, receive, head, frontend, lease)
            except SqsError as refused:
                # The body may be unread: closing is the only way to be rid of it.
                await _send(send, frontend.refuse(head, refused), close=True)
                return
            except ClientGone:
                return
            request = HttpRequest(head.method, head.path, head.query_string, headers, body, head.scheme, head.peer,
                                  lease.release)
            response = await frontend.handle(request)
        finally:
            lease.release()
        await _send(send, response)

    async def _read_request(scope: Scope, receive: Receive, head: HttpRequest, frontend: Frontend,
                            lease: BodyLease) -> bytes:
        """The body of a request that passed every check that can be made before reading it."""
        if scope.get("extensions", {}).get(OVER_CLIENT_CAP):
            raise ServiceUnavailable()
        declared = declared_length(head.headers)

        def oversized(size: int) -> SqsError:
            return too_large(head.headers, head.query_string, size, settings.max_request_bytes)

        if declared is not None and declared > settings.max_request_bytes:
            raise oversized(declared)
        if declared is None or declared > FREE_BYTES:
            # A body within the free allowance is buffered by the server whatever we do: the pipeline's full
            # check suffices, and a small request's signature header is parsed once, not twice.
            await frontend.identify(head)
        return await read_body(receive, declared=declared, limit=settings.max_request_bytes, lease=lease,
                               timeout=settings.body_timeout_seconds, oversized=oversized)

    return app


async def _send(send: Send, response: HttpResponse, *, close: bool = False) -> None:
    headers = [
        *((k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers),
        (b"content-length", str(len(response.body)).encode()),
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})
