"""The Lambda entry behind API Gateway: a Chalice app that hands every request to the pipeline.

Thin by design: it turns Chalice's request into :class:`HttpRequest`, runs the shared pipeline on an
event loop kept for the life of the execution environment (so worker connections and caches stay warm
between invocations), and turns the result back into a Chalice response.
"""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from chalice import Chalice, Response

from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.pipeline import Frontend
from ferrymq.frontend.wiring import build_frontend
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


def _query_string(multi: dict[str, list[str]] | None) -> str:
    # API Gateway hands over decoded parameters; SigV4 canonicalisation re-encodes them, so any faithful
    # encoding of the same pairs verifies.
    pairs = []
    for name, values in (multi or {}).items():
        for value in values:
            pairs.append(f"{quote(name, safe='-_.~')}={quote(value, safe='-_.~')}")
    return "&".join(pairs)


def _headers(request: object) -> dict[str, str]:
    """Lower-case headers; a header sent more than once keeps all its values, comma-joined as an HTTP server
    joins them (API Gateway's ``headers`` keeps only the last: ``multiValueHeaders`` has them all), so that a
    second ``Authorization`` header is seen and refused instead of silently replacing the first."""
    headers = {k.lower(): v for k, v in dict(request.headers).items()}  # type: ignore[attr-defined]
    event = request.to_original_event() if hasattr(request, "to_original_event") else None
    for name, values in ((event or {}).get("multiValueHeaders") or {}).items():
        if isinstance(values, list) and len(values) > 1:
            headers[name.lower()] = ", ".join(values)
    return headers


def to_http_request(current: object) -> HttpRequest:
    request = current  # chalice.app.Request
    context = getattr(request, "context", {}) or {}
    headers = _headers(request)
    multi = None
    if getattr(request, "query_params", None) is not None:
        multi = {k: request.query_params.getlist(k) for k in request.query_params}  # type: ignore[attr-defined]
    stage = context.get("stage")
    host = headers.get("host", context.get("domainName", "localhost"))
    if stage and host.endswith("amazonaws.com"):
        headers = {**headers, "host": f"{host}/{stage}"}
    return HttpRequest(
        method=request.method,  # type: ignore[attr-defined]
        path=context.get("path") or "/",
        query_string=_query_string(multi),
        headers=headers,
        body=request.raw_body or b"",  # type: ignore[attr-defined]
        scheme=headers.get("x-forwarded-proto", "https"),
        # The address API Gateway saw: the policy condition key aws:SourceIp.
        peer=(context.get("identity") or {}).get("sourceIp"),
    )


def _dispatch() -> Response:
    request = to_http_request(app.current_request)
    frontend = _get_frontend()
    response = _loop.run_until_complete(frontend.handle(request))
    if frontend.usage is not None:
        # One Firehose call every usage_flush_seconds at most, never one per invocation.
        frontend.usage.flush_if_due()
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
