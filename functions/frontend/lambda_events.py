"""API Gateway's and Lambda function URLs' events, read as the pipeline's :class:`HttpRequest`, and the
pipeline's answer written back in the shape the event's source wants.

Two payload formats reach the front-end function:

    REST API (v1) proxy         httpMethod, path (the resource's), requestContext.path (what the client asked
                                for: the stage is in it on the execute-api domain, a base path on a custom
                                domain), multiValueHeaders and multiValueQueryStringParameters (decoded)
    HTTP API (v2), function URL version "2.0", requestContext.http.method, rawPath (a named stage is in it),
                                rawQueryString (as sent), headers (repeats already comma-joined), cookies

Either way the request is handed on as the client signed it: the ``Host`` header as sent and the full path,
so SigV4 verifies exactly as against the local gateway.  The stage or base path goes into
``HttpRequest.base_path``, which only the queue URLs handed out read.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from ferrymq.frontend.http import HttpRequest
from ferrymq.protocol.responses import HttpResponse


class MalformedEvent(ValueError):
    """The event is none that API Gateway or a function URL sends: only a direct invoke can bring one, and the
    invocation fails with it (no client is waiting for an SQS answer)."""


def is_v2(event: Mapping[str, Any]) -> bool:
    return event.get("version") == "2.0"


def http_request(event: Mapping[str, Any]) -> HttpRequest:
    """The request ``event`` carries; raises :class:`MalformedEvent` for anything else."""
    if not isinstance(event, Mapping):
        raise MalformedEvent("The function expects an API Gateway or function URL event.")
    try:
        return _v2_request(event) if is_v2(event) else _v1_request(event)
    except (KeyError, TypeError, AttributeError) as exc:
        raise MalformedEvent("The function expects an API Gateway or function URL event.") from exc


def _v1_request(event: Mapping[str, Any]) -> HttpRequest:
    context = event.get("requestContext") or {}
    # chalice local's events carry the method and path in the request context only.
    method = event.get("httpMethod") or context["httpMethod"]
    if not isinstance(method, str):
        raise TypeError("httpMethod")
    headers = _v1_headers(event)
    path = context.get("path") or event.get("path") or "/"
    resource_path = event.get("path") or path
    base_path = path[: -len(resource_path)] if path.endswith(resource_path) and path != resource_path else ""
    identity = context.get("identity") or {}
    return HttpRequest(
        method=method,
        path=path,
        query_string=_encoded_query(event.get("multiValueQueryStringParameters"),
                                    event.get("queryStringParameters")),
        headers=_with_host(headers, context),
        body=_body(event),
        scheme=headers.get("x-forwarded-proto", "https"),
        peer=identity.get("sourceIp"),
        base_path=base_path.rstrip("/"),
    )


def _v2_request(event: Mapping[str, Any]) -> HttpRequest:
    context = event["requestContext"]
    http = context["http"]
    method = http["method"]
    path = event.get("rawPath") or http.get("path") or "/"
    if not isinstance(method, str) or not isinstance(path, str):
        raise TypeError("method")
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    cookies = event.get("cookies")
    if cookies:
        headers["cookie"] = "; ".join(str(c) for c in cookies)
    stage = context.get("stage")
    base_path = ""
    if isinstance(stage, str) and stage and stage != "$default":
        prefix = f"/{stage}"
        if path == prefix or path.startswith(prefix + "/"):
            base_path = prefix
    return HttpRequest(
        method=method,
        path=path,
        query_string=str(event.get("rawQueryString") or ""),
        headers=_with_host(headers, context),
        body=_body(event),
        scheme=headers.get("x-forwarded-proto", "https"),
        peer=http.get("sourceIp"),
        base_path=base_path,
    )


def _v1_headers(event: Mapping[str, Any]) -> dict[str, str]:
    """Lower-case headers; a header sent more than once keeps all its values, comma-joined as an HTTP server
    joins them (``headers`` keeps only the last one; ``multiValueHeaders`` has them all), so that a second
    ``Authorization`` header is seen and refused instead of silently replacing the first."""
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    for name, values in (event.get("multiValueHeaders") or {}).items():
        if isinstance(values, list) and values:
            headers[str(name).lower()] = ", ".join(str(v) for v in values)
    return headers


def _with_host(headers: dict[str, str], context: Mapping[str, Any]) -> dict[str, str]:
    if "host" not in headers and context.get("domainName"):
        # A test invoke from the console carries no Host header; the API's own name is what a client signs.
        headers["host"] = str(context["domainName"])
    return headers


def _encoded_query(multi: Mapping[str, list[str]] | None, single: Mapping[str, str] | None) -> str:
    """API Gateway v1 hands over decoded parameters; SigV4 canonicalisation re-encodes them, so any faithful
    encoding of the same pairs verifies."""
    pairs = multi if multi else {k: [v] for k, v in (single or {}).items()}
    return "&".join(
        f"{quote(str(name), safe='-_.~')}={quote(str(value), safe='-_.~')}"
        for name, values in pairs.items()
        for value in (values or [])
    )


def _body(event: Mapping[str, Any]) -> bytes:
    body = event.get("body")
    if body is None:
        return b""
    if isinstance(body, bytes):
        # chalice local hands the body over as it read it.
        return body
    if not isinstance(body, str):
        raise TypeError("body")
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except binascii.Error as exc:
            raise MalformedEvent("The event's body is not valid base64.") from exc
    return body.encode("utf-8")


def lambda_result(event: Mapping[str, Any], response: HttpResponse) -> dict[str, Any]:
    """``response`` as the event's source wants it back.  SQS answers are UTF-8 JSON or XML, sent as text;
    anything else goes base64, which API Gateway and function URLs decode."""
    try:
        body: str = response.body.decode("utf-8")
        encoded = False
    except UnicodeDecodeError:
        body, encoded = base64.b64encode(response.body).decode("ascii"), True
    headers: dict[str, str] = {}
    multi: dict[str, list[str]] = {}
    for name, value in response.headers:
        multi.setdefault(name, []).append(value)
        headers[name] = value
    result: dict[str, Any] = {"statusCode": response.status, "body": body, "isBase64Encoded": encoded}
    if is_v2(event):
        # Payload 2.0 has no multi-value headers: repeats are comma-joined.
        result["headers"] = {name: ", ".join(values) for name, values in multi.items()}
    else:
        result["headers"] = headers
        result["multiValueHeaders"] = multi
    return result
