"""The front end's side of usage records: one record per answered request, refused ones included.

``UsageRecorder.record`` runs on the request path, after the response is rendered.  It only keeps references
to what the request already produced (parameters, result, headers), plus what must be read on the event
loop's thread (the caller's queue, its cached SSE setting and the KMS calls the request made), as one tuple in
the writer's buffer.
Everything slower (measuring payloads, billing units, formatting the time, JSON, gzip, uploads) happens in
the writer's flusher thread (:func:`build`).  It never raises into the request: a recording bug is logged and
the request is answered as if nothing happened.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Mapping
from typing import Any

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.errors import SqsError
from ferrymq.frontend.encryption import SSE_NONE, sse_mode, take_kms_calls
from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.queue_urls import parse_queue_url
from ferrymq.protocol.requests import parse_request
from ferrymq.usage import schema
from ferrymq.usage.writer import UsageWriter

log = logging.getLogger(__name__)

QueueLookup = Callable[[str, str, str | None], QueueRecord | None]
"""The cached catalog record of (account, name, region), or None: never a DynamoDB call."""


def default_instance() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _scope(request: HttpRequest) -> list[str]:
    """The SigV4 credential scope a request names, unverified: [key id, date, region, service, ...]."""
    header = request.headers.get("authorization", "")
    start = header.find("Credential=")
    if start >= 0:
        return header[start + 11:].split(",", 1)[0].split("/")
    query = request.query_string
    start = query.find("X-Amz-Credential=")
    if start >= 0:
        return query[start + 17:].split("&", 1)[0].replace("%2F", "/").replace("%2f", "/").split("/")
    return []


def access_key_of(request: HttpRequest) -> str | None:
    """The access key id a request names, read without verifying anything (refused requests have one too)."""
    scope = _scope(request)
    return scope[0] or None if scope else None


def region_of(request: HttpRequest) -> str | None:
    """The region a request was signed for: where a queue URL that names none is looked for."""
    scope = _scope(request)
    return scope[2] or None if len(scope) > 2 else None


def _queue_of(region: str | None, params: Mapping[str, Any] | None, path_queue_url: str | None,
              action: str | None, account: str | None) -> tuple[str, str, str | None] | None:
    """(account, name, region or None) of the queue a request signed for ``region`` names."""
    if params is None:
        return None
    url = params.get("QueueUrl") or path_queue_url
    if isinstance(url, str) and url:
        try:
            address = parse_queue_url(url, account)
        except SqsError:
            return None
        return address.account, address.name, address.region or region
    if action == "CreateQueue" and account is not None and isinstance(params.get("QueueName"), str):
        return account, params["QueueName"], region
    return None


def _sse_of(record: QueueRecord | None) -> str:
    return SSE_NONE if record is None else sse_mode(record.attributes)


class UsageRecorder:
    def __init__(self, writer: UsageWriter, *, region: str, queue_lookup: QueueLookup) -> None:
        self._writer = writer
        self._region = region
        self._lookup = queue_lookup

    def record(self, request: HttpRequest, *, request_id: str, arrived: float, latency: float,
               account: str | None, action: str | None, params: Mapping[str, Any] | None,
               path_queue_url: str | None, result: Mapping[str, Any] | None, error: BaseException | None,
               status: int, response_bytes: int = 0, region: str | None = None) -> None:
        """``region``: the verified request's (its credential scope), where a URL naming none points."""
        try:
            queue = _queue_of(region, params, path_queue_url, action, account)
            sse = SSE_NONE if queue is None else _sse_of(self._lookup(*queue))
            # Read here, on the request's context: encryption counted its calls there.
            kms_calls = take_kms_calls()
            # The result only counts when the request succeeded (a failed receive returned no messages).
            raw = (request, request_id, arrived, latency, account, action, params, path_queue_url,
                   result if error is None else None, error, status, queue, sse, kms_calls)
            self._writer.add(raw, len(request.body) + response_bytes)
        except Exception:  # a recording bug must never turn into a failed request
            log.exception("usage record of request %s failed", request_id)

    def build(self, raw: tuple[Any, ...]) -> dict[str, Any]:
        """The stored record of what ``record`` buffered; runs in the writer's flusher."""
        (request, request_id, arrived, latency, account, action, params, path_queue_url, result, error, status,
         queue, sse, kms_calls) = raw
        if action is None and error is not None:
            # Refused before parsing (a bad signature, an unknown key): parse now, only to name what was refused.
            try:
                parsed = parse_request(request.method, request.path, request.query_string, request.headers,
                                       request.body)
                action, params, path_queue_url = parsed.action, parsed.params, parsed.path_queue_url_path
                queue = _queue_of(region_of(request), params, path_queue_url, action, account)
            except SqsError:
                pass
        action = action or schema.UNKNOWN_ACTION
        messages_in, entries_failed, bytes_in, messages_out, bytes_out = schema.measure(action, params, result)
        if error is None:
            outcome = schema.SUCCESS
        elif isinstance(error, SqsError):
            outcome = error.query_code
        else:
            outcome = "InternalFailure"
        headers = request.headers
        forwarded = headers.get("x-forwarded-for")
        user_agent = headers.get("user-agent")
        return {
            "v": schema.VERSION,
            "ts": schema.format_ts(arrived),
            "request_id": request_id,
            "account": account,
            "access_key_id": access_key_of(request),
            "queue_arn": None if queue is None else f"arn:aws:sqs:{queue[2] or self._region}:{queue[0]}:{queue[1]}",
            "action": action,
            "outcome": outcome,
            "http_status": status,
            "messages_in": messages_in,
            "entries_failed": entries_failed,
            "bytes_in": bytes_in,
            "messages_out": messages_out,
            "bytes_out": bytes_out,
            "billable_units": schema.billable_units(bytes_in, bytes_out),
            "latency_ms": round(latency * 1000.0, 3),
            "instance": self._writer.instance,
            "queue_type": None if queue is None else ("fifo" if queue[1].endswith(".fifo") else "standard"),
            "sse": sse,
            "kms_calls": kms_calls,
            "source_ip": forwarded.split(",", 1)[0].strip() if forwarded else request.peer,
            "user_agent": user_agent[: schema.USER_AGENT_MAX] if user_agent else None,
        }

    def flush_if_due(self) -> None:
        """For an entry without a flusher thread (Lambda): ship the buffer when it is due."""
        if self._writer.due():
            self._writer.flush()

    def close(self) -> None:
        self._writer.close()
