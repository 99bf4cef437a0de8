"""The ASGI app's order of checks: nothing of a body is read until the headers have passed every check."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import orjson

from ferrymq.errors import InvalidClientTokenId, MissingAuthenticationToken, SqsError
from ferrymq.frontend.asgi import create_app
from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.transport_limits import OVER_CLIENT_CAP
from ferrymq.protocol.responses import HttpResponse, render_error
from ferrymq.settings import Settings

GOOD_KEY = "AWS4-HMAC-SHA256 Credential=good/20261122/us-east-1/sqs/aws4_request"
JSON_LIST_QUEUES = [(b"x-amz-target", b"AmazonSQS.ListQueues"), (b"content-type", b"application/x-amz-json-1.0")]


class FakeFrontend:
    """Accepts the access key ``good``; answers 200 with what it saw, after verifying as the pipeline does."""

    metrics = None

    def __init__(self) -> None:
        self.handled: list[HttpRequest] = []
        self.budget_seen_in_handle: list[int] = []

    async def identify(self, request: HttpRequest) -> None:
        auth = request.headers.get("authorization")
        if auth is None:
            raise MissingAuthenticationToken("Request is missing Authentication Token")
        if "Credential=good/" not in auth:
            raise InvalidClientTokenId("The security token included in the request is invalid.")

    def refuse(self, request: HttpRequest, error: SqsError) -> HttpResponse:
        return render_error("json" if "x-amz-target" in request.headers else "query", error, "request-id")

    async def handle(self, request: HttpRequest) -> HttpResponse:
        self.handled.append(request)
        if request.on_authenticated is not None:
            request.on_authenticated()
        return HttpResponse(200, [("content-type", "text/plain")], b"ok")

    async def close(self) -> None:
        pass


def _scope(headers: list[tuple[bytes, bytes]], *, extensions: dict[str, Any] | None = None) -> dict[str, Any]:
    scope: dict[str, Any] = {
        "type": "http", "method": "POST", "path": "/", "raw_path": b"/", "query_string": b"",
        "headers": headers, "scheme": "http", "client": ("127.0.0.1", 50000),
    }
    if extensions is not None:
        scope["extensions"] = extensions
    return scope


def _call(app: Any, scope: dict[str, Any], chunks: list[bytes] | None) -> tuple[list[dict[str, Any]], int]:
    """Run one request; ``chunks`` None means a body that must never be read. Returns (sent, receives)."""
    sent: list[dict[str, Any]] = []
    received = 0
    pending = list(chunks or [])

    async def receive() -> dict[str, Any]:
        nonlocal received
        if chunks is None:
            raise AssertionError("the body was read")
        received += 1
        body = pending.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(pending)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent, received


def _status_and_headers(sent: list[dict[str, Any]]) -> tuple[int, dict[bytes, bytes]]:
    return sent[0]["status"], dict(sent[0]["headers"])


MAX_BODY = 1_000_000
# Two bodies of BODY bytes, less the free allowance each, do not fit in BUDGET; one does.
BUDGET = 150_000
BODY = 200_000


def _settings(**changes: Any) -> Settings:
    return Settings(max_request_bytes=MAX_BODY, unauthenticated_buffer_bytes=BUDGET, **changes)


def test_a_request_without_credentials_is_refused_before_its_body_is_read() -> None:
    # given a gateway app and a request with a large body and no Authorization header
    frontend = FakeFrontend()
    app = create_app(_settings(), frontend)  # type: ignore[arg-type]
    # when it arrives (its body must never be read)
    sent, _ = _call(app, _scope([(b"content-length", str(BODY).encode())]), None)
    # then it gets the query protocol's 403, and the connection is closed so the body need not be drained
    status, headers = _status_and_headers(sent)
    assert status == 403
    assert headers[b"connection"] == b"close"
    assert b"<Code>MissingAuthenticationToken</Code>" in sent[1]["body"]
    assert frontend.handled == []


def test_an_unknown_key_is_refused_before_its_body_is_read_in_the_json_protocol() -> None:
    app = create_app(_settings(), FakeFrontend())  # type: ignore[arg-type]
    scope = _scope([*JSON_LIST_QUEUES, (b"authorization", b"AWS4-HMAC-SHA256 Credential=nobody/x"),
                    (b"content-length", str(BODY).encode())])
    sent, _ = _call(app, scope, None)
    status, headers = _status_and_headers(sent)
    assert status == 403
    assert orjson.loads(sent[1]["body"])["__type"] == "com.amazon.coral.service#InvalidClientTokenId"
    assert headers[b"x-amzn-query-error"] == b"InvalidClientTokenId;Sender"


def test_an_oversized_body_gets_the_size_error_before_anything_else() -> None:
    # given a request declaring more than max_request_bytes, even without credentials
    app = create_app(_settings(), FakeFrontend())  # type: ignore[arg-type]
    sent, _ = _call(app, _scope([*JSON_LIST_QUEUES, (b"content-length", str(MAX_BODY + 1).encode())]), None)
    # then it gets 413 RequestEntityTooLarge in its protocol, unread
    status, headers = _status_and_headers(sent)
    assert status == 413
    assert orjson.loads(sent[1]["body"]) == {
        "__type": "com.amazon.coral.service#RequestEntityTooLarge",
        "message": f"HTTP content length exceeded {MAX_BODY} bytes.",
    }
    assert headers[b"connection"] == b"close"


def test_a_connection_over_the_client_cap_gets_503_unread() -> None:
    app = create_app(_settings(), FakeFrontend())  # type: ignore[arg-type]
    scope = _scope([*JSON_LIST_QUEUES, (b"authorization", GOOD_KEY.encode()), (b"content-length", b"2")],
                   extensions={OVER_CLIENT_CAP: True})
    sent, _ = _call(app, scope, None)
    status, headers = _status_and_headers(sent)
    assert status == 503
    assert orjson.loads(sent[1]["body"])["__type"] == "com.amazon.coral.service#ServiceUnavailable"
    assert headers[b"connection"] == b"close"


class SlowFrontend(FakeFrontend):
    """Verifies the first request, then keeps it in the action until released."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def handle(self, request: HttpRequest) -> HttpResponse:
        response = await super().handle(request)
        if len(self.handled) == 1:
            await self.release.wait()
        return response


def _run_two(app: Any, frontend: SlowFrontend, verify_first: bool) -> tuple[int, int]:
    auth = [(b"authorization", GOOD_KEY.encode()), (b"content-length", str(BODY).encode())]

    async def one(body: bytes) -> int:
        sent: list[dict[str, Any]] = []
        chunks = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, Any]:
            return chunks.pop(0)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(_scope(auth), receive, send)
        return int(sent[0]["status"])

    async def scenario() -> tuple[int, int]:
        first = asyncio.create_task(one(b"a" * BODY))
        while not frontend.handled:
            await asyncio.sleep(0)
        second = await one(b"b" * BODY)
        frontend.release.set()
        return await first, second

    if not verify_first:
        frontend.handle = _without_verification(frontend.handle)  # type: ignore[method-assign]
    return asyncio.run(scenario())


def _without_verification(handle: Any) -> Any:
    async def unverified(request: HttpRequest) -> HttpResponse:
        return await handle(replace(request, on_authenticated=None))

    return unverified


def test_a_request_gives_its_budget_back_once_verified_not_when_it_ends() -> None:
    # given a budget too small for two large bodies, and a first request that is verified, then busy in its action
    frontend = SlowFrontend()
    app = create_app(_settings(), frontend)  # type: ignore[arg-type]
    # when a second one arrives meanwhile, then both are served
    assert _run_two(app, frontend, verify_first=True) == (200, 200)


def test_a_request_not_yet_verified_keeps_its_share_of_the_budget() -> None:
    # given the same two requests, but the first never reports its signature verified
    frontend = SlowFrontend()
    app = create_app(_settings(), frontend)  # type: ignore[arg-type]
    # then the second finds the budget spent and gets SQS's 503 (retried by SDKs)
    assert _run_two(app, frontend, verify_first=False) == (200, 503)


def test_an_upgrade_request_is_answered_as_plain_http_and_the_connection_closed() -> None:
    # given a WebSocket upgrade request without credentials (uvicorn runs with upgrades off)
    app = create_app(_settings(), FakeFrontend())  # type: ignore[arg-type]
    scope = _scope([(b"connection", b"Upgrade"), (b"upgrade", b"websocket")])
    scope["method"] = "GET"
    sent, _ = _call(app, scope, None)
    # then it is refused like any unauthenticated request, never a 500
    status, headers = _status_and_headers(sent)
    assert status == 403
    assert headers[b"connection"] == b"close"


def test_an_authenticated_upgrade_request_is_served_as_plain_http() -> None:
    # (the server's protocol reads its body and parses the connection on: infra/http_protocol.py)
    app = create_app(_settings(), FakeFrontend())  # type: ignore[arg-type]
    scope = _scope([(b"connection", b"Upgrade"), (b"upgrade", b"websocket"), (b"authorization", GOOD_KEY.encode())])
    sent, _ = _call(app, scope, [b""])
    status, headers = _status_and_headers(sent)
    assert status == 200
    assert b"connection" not in headers


def test_a_request_over_tls_is_marked_secure() -> None:
    frontend = FakeFrontend()
    app = create_app(_settings(), frontend)  # type: ignore[arg-type]
    scope = _scope([(b"authorization", GOOD_KEY.encode())])
    scope["scheme"] = "https"
    _call(app, scope, [b""])
    _call(app, _scope([(b"authorization", GOOD_KEY.encode())]), [b""])
    assert [r.secure_transport for r in frontend.handled] == [True, False]


def test_a_small_body_is_left_to_the_pipeline_to_authenticate() -> None:
    # given a request without credentials whose body is within the free allowance (the server buffers it anyway)
    frontend = FakeFrontend()
    app = create_app(_settings(), frontend)  # type: ignore[arg-type]
    # when it arrives, then it is read and handed to the pipeline, whose full check is the one that applies
    sent, reads = _call(app, _scope([(b"content-length", b"2")]), [b"{}"])
    assert reads == 1
    assert [r.body for r in frontend.handled] == [b"{}"]
    assert _status_and_headers(sent)[0] == 200


def test_a_body_of_unknown_length_is_identified_first() -> None:
    app = create_app(_settings(), FakeFrontend())  # type: ignore[arg-type]
    sent, _ = _call(app, _scope([(b"transfer-encoding", b"chunked")]), None)
    assert _status_and_headers(sent)[0] == 403
