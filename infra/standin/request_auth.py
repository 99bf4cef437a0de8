"""SigV4 verification in front of the stand-in: only requests signed with its one key pair reach moto.

moto accepts any credentials, so on its own the stand-in would hand the whole queue catalog to anyone who can
reach its port. :class:`RequestVerifier` checks, for every request, that the credential scope names the
stand-in's access key and that the signature is the one that key's secret gives for this request (header or
presigned-query form), and otherwise produces the refusal AWS sends, in the protocol of the request:

- no signature: ``MissingAuthenticationTokenException`` 400 (JSON), ``MissingAuthenticationToken`` 403 (query),
  ``AccessDenied`` 403 (S3);
- a malformed one: ``IncompleteSignatureException`` 400, ``IncompleteSignature`` 400,
  ``AuthorizationHeaderMalformed`` 400;
- an unknown access key: ``UnrecognizedClientException`` 400, ``InvalidClientTokenId`` 403, ``InvalidAccessKeyId`` 403;
- a wrong signature: ``InvalidSignatureException`` 400, ``SignatureDoesNotMatch`` 403, ``SignatureDoesNotMatch`` 403;
- a signing time (``X-Amz-Date``) more than 15 minutes from the stand-in's clock, either way:
  ``InvalidSignatureException`` 400 and ``SignatureDoesNotMatch`` 403 ("Signature expired: ..." / "Signature not
  yet current: ..."), ``RequestTimeTooSkewed`` 403;
- a presigned URL past its ``X-Amz-Expires``, or dated over 15 minutes ahead: as above, but ``AccessDenied`` 403
  "Request has expired" / "Request is not yet valid" for S3; a
  missing or invalid ``X-Amz-Expires`` (1 to 604800 seconds): ``IncompleteSignatureException`` 400,
  ``IncompleteSignature`` 400, ``AuthorizationQueryParametersError`` 400.

The time is checked once the access key is known to be the stand-in's, before the signature is computed: a
request recorded once cannot be replayed later, and clients whose clock is off learn why at once.

Requests made inside the stand-in (journal replay, the TTL sweeper) go to :class:`DurableApp` directly and
are not checked.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, unquote
from xml.sax.saxutils import escape

from ferrymq.infra.standin.access_keys import KeyPair

ALGORITHM = "AWS4-HMAC-SHA256"
_UNSIGNED = frozenset({"UNSIGNED-PAYLOAD", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"})
_HEX = frozenset("0123456789abcdef")
_SIGNING_KEY_CACHE_LIMIT = 64
MAX_SKEW = timedelta(minutes=15)
"""How far a signing time may be from the stand-in's clock, either way (AWS's window)."""
MAX_PRESIGN_EXPIRES_SECONDS = 604800
_AMZ_DATE = "%Y%m%dT%H%M%SZ"

_INVALID_TOKEN = "The security token included in the request is invalid."
_MISSING_TOKEN = "Request is missing Authentication Token"
_SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access "
    "Key and signing method. Consult the service documentation for details."
)
_S3_SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your key and signing "
    "method."
)

# (JSON code, JSON status, query code, query status, S3 code, S3 status, S3 message) per kind of refusal.
_CODES: dict[str, tuple[str, int, str, int, str, int, str]] = {
    "missing": ("MissingAuthenticationTokenException", 400, "MissingAuthenticationToken", 403,
                "AccessDenied", 403, "Access Denied"),
    "incomplete": ("IncompleteSignatureException", 400, "IncompleteSignature", 400,
                   "AuthorizationHeaderMalformed", 400, "The authorization header is malformed."),
    "unknown_key": ("UnrecognizedClientException", 400, "InvalidClientTokenId", 403,
                    "InvalidAccessKeyId", 403, "The AWS Access Key Id you provided does not exist in our records."),
    "signature": ("InvalidSignatureException", 400, "SignatureDoesNotMatch", 403,
                  "SignatureDoesNotMatch", 403, _S3_SIGNATURE_MISMATCH),
    "payload": ("InvalidSignatureException", 400, "SignatureDoesNotMatch", 403,
                "XAmzContentSHA256Mismatch", 400, "The provided 'x-amz-content-sha256' header does not match what "
                "was computed."),
    "presign_params": ("IncompleteSignatureException", 400, "IncompleteSignature", 400,
                       "AuthorizationQueryParametersError", 400, "Query-string authentication is malformed."),
    "skewed": ("InvalidSignatureException", 400, "SignatureDoesNotMatch", 403,
               "RequestTimeTooSkewed", 403, "The difference between the request time and the current time is too "
               "large."),
    "url_expired": ("InvalidSignatureException", 400, "SignatureDoesNotMatch", 403,
                    "AccessDenied", 403, "Request has expired"),
    "url_not_yet": ("InvalidSignatureException", 400, "SignatureDoesNotMatch", 403,
                    "AccessDenied", 403, "Request is not yet valid"),
}
_JSON_MESSAGES = {"missing": _MISSING_TOKEN, "unknown_key": _INVALID_TOKEN, "signature": _SIGNATURE_MISMATCH,
                  "payload": _SIGNATURE_MISMATCH}


@dataclass(frozen=True, slots=True)
class Refusal:
    """An HTTP answer that refuses a request, ready to send."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    code: str


@dataclass(frozen=True, slots=True)
class _Signed:
    access_key: str
    date: str
    region: str
    service: str
    signed_headers: list[str]
    signature: str
    amz_date: str
    presigned: bool
    expires: str | None = None
    """A presigned URL's ``X-Amz-Expires``, as sent."""


class _Malformed(Exception):
    """The signature's parts cannot be read."""

    def __init__(self, message: str, kind: str = "incomplete") -> None:
        super().__init__(message)
        self.kind = kind


class RequestVerifier:
    """Checks SigV4 signatures against one key pair; the signing key is derived once per day, region and service."""

    def __init__(self, pair: KeyPair, clock: Callable[[], float] = time.time) -> None:
        self._pair = pair
        self._clock = clock
        self._signing_keys: dict[tuple[str, str, str], bytes] = {}

    def check(self, scope: dict[str, Any], body: bytes) -> Refusal | None:
        """None when ``scope``/``body`` (an ASGI HTTP request) is signed with the stand-in's key pair."""
        headers = _headers(scope)
        query: str = scope.get("query_string", b"").decode("latin-1")
        try:
            signed = _read_signature(headers, query)
        except _Malformed as exc:
            return _refuse(exc.kind, headers, None, str(exc))
        if signed is None:
            return _refuse("missing", headers, None)
        if not hmac.compare_digest(signed.access_key.encode(), self._pair.access_key_id.encode()) or (
            "x-amz-security-token" in headers or "X-Amz-Security-Token=" in query
        ):
            # The stand-in's key is a long-term key: a session token means credentials it never issued.
            return _refuse("unknown_key", headers, signed.service)
        untimely = self._untimely(signed, headers)
        if untimely is not None:
            return untimely
        payload_hash = self._payload_hash(headers, body, signed)
        if payload_hash is None:
            return _refuse("payload", headers, signed.service)
        key = self._signing_key(signed.date, signed.region, signed.service)
        for canonical_query in _canonical_queries(query, signed.presigned):
            canonical = _canonical_request(scope, headers, canonical_query, signed, payload_hash)
            expected = _signature(key, signed, canonical)
            if hmac.compare_digest(expected, signed.signature):
                return None
        return _refuse("signature", headers, signed.service)

    def _untimely(self, signed: _Signed, headers: dict[str, list[str]]) -> Refusal | None:
        """The refusal of a request signed too long ago or too far ahead, or of an expired presigned URL."""
        malformed = "presign_params" if signed.presigned else "incomplete"
        try:
            signed_at = datetime.strptime(signed.amz_date, _AMZ_DATE).replace(tzinfo=UTC)
        except ValueError:
            return _refuse(malformed, headers, signed.service,
                           f"Date must be in ISO-8601 'basic format'. Got '{signed.amz_date}'.")
        now = datetime.fromtimestamp(self._clock(), UTC).replace(microsecond=0)
        not_yet = (f"Signature not yet current: {signed.amz_date} is still later than {_amz(now + MAX_SKEW)} "
                   f"({_amz(now)} + 15 min.)")
        if not signed.presigned:
            if signed_at > now + MAX_SKEW:
                return _refuse("skewed", headers, signed.service, not_yet,
                               s3_extra=_skew_details(signed.amz_date, now))
            if signed_at < now - MAX_SKEW:
                return _refuse("skewed", headers, signed.service,
                               f"Signature expired: {signed.amz_date} is now earlier than {_amz(now - MAX_SKEW)} "
                               f"({_amz(now)} - 15 min.)",
                               s3_extra=_skew_details(signed.amz_date, now))
            return None
        expires = _presign_expires(signed.expires)
        if isinstance(expires, str):
            return _refuse("presign_params", headers, signed.service, expires)
        lifetime = timedelta(seconds=expires)
        deadline = signed_at + lifetime
        if signed_at > now + MAX_SKEW:
            return _refuse("url_not_yet", headers, signed.service, not_yet,
                           s3_extra=[("X-Amz-Date", signed.amz_date), ("Expires", _iso(deadline)),
                                     ("ServerTime", _iso(now))])
        if now > deadline:
            return _refuse("url_expired", headers, signed.service,
                           f"Signature expired: {signed.amz_date} is now earlier than {_amz(now - lifetime)} "
                           f"({_amz(now)} - {expires} sec.)",
                           s3_extra=[("X-Amz-Expires", str(expires)), ("Expires", _iso(deadline)),
                                     ("ServerTime", _iso(now))])
        return None

    @staticmethod
    def _payload_hash(headers: dict[str, list[str]], body: bytes, signed: _Signed) -> str | None:
        """The payload hash the signature covers; None when a claimed hash does not match the body."""
        claimed = headers.get("x-amz-content-sha256")
        if claimed:
            value = claimed[0]
            if value in _UNSIGNED or value.startswith("STREAMING-"):
                return value
            if len(value) == 64 and set(value) <= _HEX:
                return value if hmac.compare_digest(value, hashlib.sha256(body).hexdigest()) else None
            return value
        if signed.presigned:
            return "UNSIGNED-PAYLOAD"
        return hashlib.sha256(body).hexdigest()

    def _signing_key(self, date: str, region: str, service: str) -> bytes:
        cache_key = (date, region, service)
        key = self._signing_keys.get(cache_key)
        if key is None:
            key = ("AWS4" + self._pair.secret_access_key).encode()
            for part in (date, region, service, "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            if len(self._signing_keys) >= _SIGNING_KEY_CACHE_LIMIT:
                self._signing_keys.clear()
            self._signing_keys[cache_key] = key
        return key


def _amz(moment: datetime) -> str:
    return moment.strftime(_AMZ_DATE)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _skew_details(amz_date: str, now: datetime) -> list[tuple[str, str]]:
    return [("RequestTime", amz_date), ("ServerTime", _iso(now)),
            ("MaxAllowedSkewMilliseconds", str(int(MAX_SKEW.total_seconds() * 1000)))]


def _presign_expires(value: str | None) -> int | str:
    """A presigned URL's lifetime in seconds, or why ``value`` is not one (S3's words)."""
    if value is None:
        return ("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, "
                "X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.")
    try:
        seconds = int(value)
    except ValueError:
        return "X-Amz-Expires should be a number"
    if seconds < 0:
        return "X-Amz-Expires must be non-negative"
    if seconds > MAX_PRESIGN_EXPIRES_SECONDS:
        return f"X-Amz-Expires must be less than a week (in seconds) that is {MAX_PRESIGN_EXPIRES_SECONDS}"
    return seconds


def _headers(scope: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in scope.get("headers", []):
        out.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return out


def _read_signature(headers: dict[str, list[str]], query: str) -> _Signed | None:
    authorization = headers.get("authorization")
    if authorization:
        if len(authorization) > 1:
            raise _Malformed("More than one Authorization header.")
        return _from_header(authorization[0], headers)
    if "X-Amz-Credential=" in query:
        return _from_query(query)
    return None


def _from_header(value: str, headers: dict[str, list[str]]) -> _Signed:
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        raise _Malformed(f"Unsupported signing algorithm {algorithm!r}.")
    parts: dict[str, str] = {}
    for item in rest.split(","):
        name, sep, part = item.strip().partition("=")
        if sep:
            parts[name] = part
    for required in ("Credential", "SignedHeaders", "Signature"):
        if required not in parts:
            raise _Malformed(f"Authorization header requires '{required}' parameter.")
    amz_date = (headers.get("x-amz-date") or [""])[0]
    if not amz_date:
        raise _Malformed("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
    return _signed(parts["Credential"], parts["SignedHeaders"], parts["Signature"], amz_date, presigned=False)


def _from_query(query: str) -> _Signed:
    params = {}
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        params[unquote(name)] = unquote(value)
    if params.get("X-Amz-Algorithm") != ALGORITHM:
        raise _Malformed("X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\".", "presign_params")
    try:
        return _signed(params["X-Amz-Credential"], params["X-Amz-SignedHeaders"], params["X-Amz-Signature"],
                       params["X-Amz-Date"], presigned=True, expires=params.get("X-Amz-Expires"))
    except KeyError as exc:
        raise _Malformed(f"Query-string authentication requires the {exc.args[0]} parameter.",
                         "presign_params") from None


def _signed(credential: str, signed_headers: str, signature: str, amz_date: str, *, presigned: bool,
            expires: str | None = None) -> _Signed:
    scope = credential.split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        raise _Malformed(f"Credential should be scoped to a valid region, not {credential!r}.")
    return _Signed(scope[0], scope[1], scope[2], scope[3], signed_headers.lower().split(";"), signature.lower(),
                   amz_date, presigned, expires)


def _canonical_queries(query: str, presigned: bool) -> list[str]:
    """The canonical query string as botocore signs a URL's query (as sent), then as the SigV4 rules spell it
    (each name and value encoded anew); they differ only for clients that encode characters differently."""
    pairs = []
    for pair in query.split("&") if query else []:
        name, _, value = pair.partition("=")
        if presigned and unquote(name) == "X-Amz-Signature":
            continue
        pairs.append((name, value))
    as_sent = "&".join(f"{k}={v}" for k, v in sorted(pairs))
    encoded = "&".join(
        f"{k}={v}"
        for k, v in sorted((quote(unquote(k), safe="-_.~"), quote(unquote(v), safe="-_.~")) for k, v in pairs)
    )
    return [as_sent] if encoded == as_sent else [as_sent, encoded]


def _canonical_request(scope: dict[str, Any], headers: dict[str, list[str]], canonical_query: str, signed: _Signed,
                       payload_hash: str) -> bytes:
    raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    # S3 signs the path as sent; every other service signs it percent-encoded once more.
    path = raw_path if signed.service == "s3" else quote(raw_path, safe="/~")
    lines = [scope["method"], path, canonical_query]
    for name in signed.signed_headers:
        lines.append(f"{name}:{','.join(' '.join(v.split()) for v in headers.get(name, []))}")
    lines += ["", ";".join(signed.signed_headers), payload_hash]
    return "\n".join(lines).encode()


def _signature(key: bytes, signed: _Signed, canonical: bytes) -> str:
    credential_scope = f"{signed.date}/{signed.region}/{signed.service}/aws4_request"
    to_sign = f"{ALGORITHM}\n{signed.amz_date}\n{credential_scope}\n{hashlib.sha256(canonical).hexdigest()}"
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def _refuse(kind: str, headers: dict[str, list[str]], service: str | None, detail: str | None = None, *,
            s3_extra: list[tuple[str, str]] | None = None) -> Refusal:
    """AWS's refusal of ``kind`` in the request's protocol. ``detail`` replaces the message; with ``s3_extra``
    (S3's further elements of the error), S3 keeps its own fixed message and adds those elements."""
    json_code, json_status, query_code, query_status, s3_code, s3_status, s3_message = _CODES[kind]
    request_id = str(uuid.uuid4())
    target = (headers.get("x-amz-target") or [""])[0]
    content_type = (headers.get("content-type") or [""])[0]
    if target:
        message = detail or _JSON_MESSAGES[kind]
        dynamodb = target.startswith("DynamoDB_")
        error_type = f"com.amazon.coral.service#{json_code}" if dynamodb else json_code
        body = json.dumps({"__type": error_type, "message": message}).encode()
        media = "application/x-amz-json-1.0" if dynamodb else "application/x-amz-json-1.1"
        return _refusal(json_status, media, body, json_code, request_id)
    if service == "s3" or (service is None and "x-www-form-urlencoded" not in content_type):
        message = s3_message if s3_extra is not None else detail or s3_message
        extra = "".join(f"<{name}>{escape(value)}</{name}>" for name, value in s3_extra or ())
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{s3_code}</Code>'
                f"<Message>{escape(message)}</Message>{extra}<RequestId>{request_id}</RequestId></Error>").encode()
        return _refusal(s3_status, "application/xml", body, s3_code, request_id)
    message = detail or _JSON_MESSAGES.get(kind, _SIGNATURE_MISMATCH)
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<ErrorResponse><Error><Type>Sender</Type>'
            f"<Code>{query_code}</Code><Message>{escape(message)}</Message></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>").encode()
    return _refusal(query_status, "text/xml", body, query_code, request_id)


def _refusal(status: int, media: str, body: bytes, code: str, request_id: str) -> Refusal:
    headers = [
        (b"content-type", media.encode()),
        (b"x-amzn-requestid", request_id.encode()),
        (b"x-amzn-errortype", code.encode()),
    ]
    return Refusal(status, headers, body, code)
