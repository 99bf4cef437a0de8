"""Raw SigV4-signed SQS requests that a test may bend: what is signed, for which region and service, with which
payload hash and session token, and which headers are added, changed or repeated afterwards.

The signer here is written from AWS's description of Signature Version 4 (canonical request, string to sign,
derived key), independently of the server's verifier, and sends over ``http.client`` so that a header may be
sent twice.  It handles what the tests send: a path without dot segments and a query of plain pairs.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import json
from dataclasses import dataclass, field
from urllib.parse import quote, urlencode, urlsplit
from xml.etree import ElementTree

JSON_TYPE = "application/x-amz-json-1.0"
FORM_TYPE = "application/x-www-form-urlencoded; charset=utf-8"


@dataclass
class Signer:
    access_key: str
    secret_key: str
    region: str = "us-east-1"
    service: str = "sqs"
    session_token: str | None = None


@dataclass
class RawRequest:
    """A request before signing: header names as sent; ``headers`` are all signed unless ``unsigned`` names them."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    unsigned: set[str] = field(default_factory=set)


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def error(self) -> tuple[str, str]:
        """(query-protocol error code, message), from either protocol's error body."""
        if self.headers.get("content-type", "").startswith("application/x-amz-json"):
            code = self.headers["x-amzn-query-error"].split(";")[0]
            return code, json.loads(self.body)["message"]
        root = ElementTree.fromstring(self.body)
        namespace = root.tag.split("}")[0] + "}" if root.tag.startswith("{") else ""
        return root.findtext(f"{namespace}Error/{namespace}Code") or "", root.findtext(
            f"{namespace}Error/{namespace}Message") or ""

    @property
    def json_type(self) -> str:
        return str(json.loads(self.body)["__type"])


def sqs_request(endpoint: str, protocol: str, action: str, params: dict[str, object]) -> RawRequest:
    """An SQS action as the JSON or query protocol carries it, to ``endpoint``'s root."""
    host = urlsplit(endpoint).netloc
    if protocol == "json":
        return RawRequest("POST", "/", "", {"Host": host, "Content-Type": JSON_TYPE,
                                            "X-Amz-Target": f"AmazonSQS.{action}"}, json.dumps(params).encode())
    form = urlencode({"Action": action, **{k: str(v) for k, v in params.items()}, "Version": "2012-11-05"})
    return RawRequest("POST", "/", "", {"Host": host, "Content-Type": FORM_TYPE}, form.encode())


def _encode(text: str) -> str:
    return quote(text, safe="-_.~")


def _canonical_query(query: str) -> str:
    pairs = []
    for part in query.split("&") if query else []:
        name, _, value = part.partition("=")
        pairs.append((name, value))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


def _key(secret: str, date: str, region: str, service: str) -> bytes:
    key = hmac.digest(f"AWS4{secret}".encode(), date.encode(), "sha256")
    for part in (region, service, "aws4_request"):
        key = hmac.digest(key, part.encode(), "sha256")
    return key


def sign(request: RawRequest, signer: Signer, *, payload_hash: str | None = None,
         at: datetime.datetime | None = None) -> list[tuple[str, str]]:
    """The headers to send: ``request.headers`` plus X-Amz-Date, the session token and Authorization.

    ``payload_hash`` replaces the body's hash in the canonical request (e.g. ``UNSIGNED-PAYLOAD``)."""
    moment = at or datetime.datetime.now(datetime.UTC)
    amz_date = moment.strftime("%Y%m%dT%H%M%SZ")
    headers = dict(request.headers)
    headers["X-Amz-Date"] = amz_date
    if signer.session_token is not None:
        headers["X-Amz-Security-Token"] = signer.session_token
    signed = {k.lower(): " ".join(v.split()) for k, v in headers.items() if k.lower() not in request.unsigned}
    names = sorted(signed)
    canonical = "\n".join([
        request.method,
        request.path,
        _canonical_query(request.query),
        "".join(f"{name}:{signed[name]}\n" for name in names),
        ";".join(names),
        payload_hash or hashlib.sha256(request.body).hexdigest(),
    ])
    scope = f"{amz_date[:8]}/{signer.region}/{signer.service}/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    signature = hmac.new(_key(signer.secret_key, amz_date[:8], signer.region, signer.service), to_sign.encode(),
                         hashlib.sha256).hexdigest()
    headers["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={signer.access_key}/{scope}, SignedHeaders={';'.join(names)}, "
        f"Signature={signature}"
    )
    return list(headers.items())


def send(endpoint: str, request: RawRequest, headers: list[tuple[str, str]],
         body: bytes | None = None) -> RawResponse:
    """Send ``headers`` exactly as listed (repeats included) with ``body`` (default: the request's)."""
    parts = urlsplit(endpoint)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        target = request.path + (f"?{request.query}" if request.query else "")
        connection.putrequest(request.method, target, skip_host=True, skip_accept_encoding=True)
        payload = request.body if body is None else body
        for name, value in headers:
            connection.putheader(name, value)
        connection.putheader("Content-Length", str(len(payload)))
        connection.endheaders(payload)
        response = connection.getresponse()
        return RawResponse(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()
