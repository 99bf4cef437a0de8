"""The Lambda entry behind API Gateway and function URLs: ``handler`` hands every request to the pipeline.

Thin by design: it reads the event as :class:`HttpRequest` (:mod:`.lambda_events`: REST API v1 proxy,
HTTP API v2 and function URL events), runs the shared pipeline on an event loop kept for the life of the
execution environment (so worker connections and caches stay warm between invocations), and writes the
answer back in the event's shape.  It does not route through Chalice: Chalice's content-type check answered
415 where the local gateway answers SQS's own error.  The Chalice ``app`` stays for ``chalice local`` and
Chalice's test client, reading its request through the same parser.
"""

from __future__ import annotations

import asyncio
from typing import Any

from chalice import Chalice, Response

from ferrymq.frontend import lambda_events
from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.pipeline import Frontend
from ferrymq.frontend.wiring import build_frontend
from ferrymq.protocol.responses import HttpResponse
from ferrymq.settings import Settings

app = Chalice(app_name="ferrymq-frontend")

_CONTENT_TYPES = [
    "application/x-amz-json-1.0",
    "application/x-www-form-urlencoded",
    "application/x-www-form-urlencoded; charset=utf-8",
    "application/json",
    "text/plain",
]
_loop = asyncio.new_event_loop()
_frontend: Frontend | None = None


def _get_frontend() -> Frontend:
    global _frontend
    if _frontend is None:
        # No usage thread: a frozen execution environment would stall it; _dispatch flushes when due instead.
        _frontend = build_frontend(Settings.from_env(), usage_thread=False)
    return _frontend


def to_http_request(current: object) -> HttpRequest:
    """Chalice's request (``chalice local``, Chalice's test client) read from the event it was built from."""
    return lambda_events.http_request(current.to_original_event())  # type: ignore[attr-defined]


def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
    """The function's entry (template.yaml): REST API v1 proxy, HTTP API v2 and function URL events alike."""
    request = lambda_events.http_request(event)
    return lambda_events.lambda_result(event, _serve(request))


def _serve(request: HttpRequest) -> HttpResponse:
    frontend = _get_frontend()
    response = _loop.run_until_complete(frontend.handle(request))
    if frontend.usage is not None:
        # One Firehose call every usage_flush_seconds at most, never one per invocation.
        frontend.usage.flush_if_due()
    return response


def _dispatch() -> Response:
    response = _serve(to_http_request(app.current_request))
    # API Gateway wants text for a non-binary body; SQS responses are always UTF-8 JSON or XML.
    return Response(body=response.body.decode("utf-8"), status_code=response.status, headers=dict(response.headers))


@app.route("/", methods=["GET", "POST"], content_types=_CONTENT_TYPES)
def root() -> Response:
    return _dispatch()


@app.route("/{account}/{queue}", methods=["GET", "POST"], content_types=_CONTENT_TYPES)
def queue_path(account: str, queue: str) -> Response:
    return _dispatch()


@app.route("/queue/{region}/{account}/{queue}", methods=["GET", "POST"], content_types=_CONTENT_TYPES)
def regional_queue_path(region: str, account: str, queue: str) -> Response:
    """The path form of queue URLs, which names the queue's region (see functions/frontend/queue_urls.py)."""
    return _dispatch()
