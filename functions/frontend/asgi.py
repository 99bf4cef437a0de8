"""The front end as a raw ASGI application, for the local gateway (uvicorn with httptools and uvloop).

Raw ASGI rather than a framework: the pipeline does its own routing, and every microsecond here is on
the hot path of every request.

The gateway's own HTTP protocol (infra/http_protocol.py) also hands this module whole requests without ASGI:
:attr:`Gateway.answer_read` answers a request whose body it has already read in full, when that body is within
the allowance a server buffers anyway (``direct_limit``) and its connection is within the per-client cap. Such a
request passes no check of :mod:`.transport_limits` that is made before a body is read (none of them refuses
it), so it is answered as the ASGI app would answer it, without the ASGI cycle, the receive and send calls and
their messages (together about as much CPU as the rest of a SendMessage's HTTP handling).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from ferrymq.errors import RequestTimeout, ServiceUnavailable, SqsError
from ferrymq.frontend import health
from ferrymq.frontend.dashboard.service import Dashboard
from ferrymq.frontend.http import HttpRequest, headers_of
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
from ferrymq.frontend.wiring import build_dashboard_sessions, build_frontend
from ferrymq.protocol.responses import HttpResponse
from ferrymq.settings import Settings

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Gateway:
    """The front end for the local gateway: the ASGI app, and the direct entry of the gateway's own protocol."""

    app: ASGIApp
    answer_read: Callable[[HttpRequest], Awaitable[HttpResponse]]
    """The answer to a request read in full (within ``direct_limit``, from a connection within the per-client
    cap, to a path :attr:`serves_read` takes), as the ASGI app gives it."""
    serves_read: Callable[[str], bool]
    """Whether :attr:`answer_read` takes requests to this path (the dashboard reads its own bodies)."""
    direct_limit: int
    """The largest declared body :attr:`answer_read` takes: within the free allowance and the request limit."""
    body_timeout: float
    """How long such a body may take to arrive after its headers."""
    answer_unread: Callable[[HttpRequest], HttpResponse]
    """The ASGI app's answer to such a request (its head) whose body did not arrive in time."""


def create_app(settings: Settings, frontend: Frontend | None = None) -> ASGIApp:
    """The front end for an ASGI server, with the transport limits of functions/frontend/transport_limits.py."""
    return create_gateway(settings, frontend).app


def create_gateway(settings: Settings, frontend: Frontend | None = None) -> Gateway:
    """:func:`create_app`'s app and the direct entry beside it, sharing one front end."""
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
                                                built.metrics, build_dashboard_sessions(built.services),
                                                built.siblings)
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
        headers = headers_of(scope["headers"])
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

    async def answer_read(request: HttpRequest) -> HttpResponse:
        # The steps of ``app`` for such a request: the checks before its body is read pass (its connection is
        # within the cap, its declared length within the limit and the free allowance, so nothing is charged
        # to the budget and ``identify`` is left to the pipeline), and reading it is done.
        frontend = get_frontend()
        if health.is_health_check(request.method, request.path, request.query_string, request.headers):
            return await health.answer(request.path, frontend.services)
        metrics = frontend.metrics
        if metrics is not None and metrics.serves(request.method, request.path, request.query_string,
                                                  request.headers):
            return await metrics.answer()
        return await frontend.handle(request)

    def serves_read(path: str) -> bool:
        return not (settings.dashboard_enabled and Dashboard.serves(path))

    def answer_unread(head: HttpRequest) -> HttpResponse:
        return get_frontend().refuse(head, RequestTimeout())

    return Gateway(app, answer_read, serves_read, min(FREE_BYTES, settings.max_request_bytes),
                   settings.body_timeout_seconds, answer_unread)


async def _send(send: Send, response: HttpResponse, *, close: bool = False) -> None:
    headers = [
        *((k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers),
        (b"content-length", str(len(response.body)).encode()),
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})
