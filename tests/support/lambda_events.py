"""The recorded API Gateway and function URL events under tests/events/, filled with a request a test signed.

A recorded document keeps everything the source adds (request context, forwarding headers, stage, the
caller's address); :func:`signed_event` puts in the signed request's method, host, path, query string, headers
and body, in the document's own format (v1 multi-value maps or v2 raw strings, base64 bodies where the
document has one), with the path under the document's stage or base path.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from botocore.awsrequest import AWSRequest

EVENTS = Path(__file__).resolve().parents[1] / "events"
DOCUMENTS = ("rest-v1-proxy", "rest-v1-query-custom-domain", "http-v2-stage", "function-url")


def load(name: str) -> dict[str, Any]:
    return dict(json.loads((EVENTS / f"{name}.json").read_text()))


def base_path(document: dict[str, Any]) -> str:
    """The stage or base path the document's source puts before the resource path."""
    if document.get("version") == "2.0":
        stage = document["requestContext"]["stage"]
        return "" if stage == "$default" else f"/{stage}"
    full, resource = document["requestContext"]["path"], document["path"]
    return full[: len(full) - len(resource)].rstrip("/") if full.endswith(resource) else ""


def signed_event(
    document: dict[str, Any], request: AWSRequest, *, forwarded_proto: str | None = None
) -> dict[str, Any]:
    """``document`` carrying ``request`` (signed already, its URL's path including the document's base path).

    ``forwarded_proto``: the scheme API Gateway reports in X-Forwarded-Proto (the document's when None)."""
    event = copy.deepcopy(document)
    url = urlsplit(request.url)
    raw_body = request.body or b""
    body = raw_body if isinstance(raw_body, bytes) else raw_body.encode()
    extra = {k: v for k, v in event["headers"].items() if k.lower().startswith("x-forwarded-")
             or k.lower() == "x-amzn-trace-id"}
    if forwarded_proto is not None:
        extra = {k: (forwarded_proto if k.lower() == "x-forwarded-proto" else v) for k, v in extra.items()}
    headers = {**dict(request.headers.items()), **extra, "Host": url.netloc}
    encoded = bool(event.get("isBase64Encoded"))
    event["body"] = (base64.b64encode(body).decode() if encoded else body.decode()) if body else None
    pairs = parse_qsl(url.query, keep_blank_values=True)
    if event.get("version") == "2.0":
        event["rawPath"] = url.path or "/"
        event["rawQueryString"] = url.query
        event["queryStringParameters"] = dict(pairs) or None
        event["headers"] = {k.lower(): v for k, v in headers.items()}
        event["requestContext"]["http"].update(method=request.method, path=url.path or "/")
        event["requestContext"]["domainName"] = url.hostname
        return event
    prefix = base_path(document)
    event["httpMethod"] = event["requestContext"]["httpMethod"] = request.method
    event["requestContext"]["path"] = url.path or "/"
    event["path"] = url.path[len(prefix):] or "/"
    event["headers"] = headers
    event["multiValueHeaders"] = {k: [v] for k, v in headers.items()}
    multi: dict[str, list[str]] = {}
    for name, value in pairs:
        multi.setdefault(name, []).append(value)
    event["multiValueQueryStringParameters"] = multi or None
    event["queryStringParameters"] = {k: v[-1] for k, v in multi.items()} or None
    event["requestContext"]["domainName"] = url.hostname
    return event
