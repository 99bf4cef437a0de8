"""SigV4 verification against requests botocore signs (Authorization header and presigned URLs)."""

from __future__ import annotations

import calendar
import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ferrymq import sigv4
from ferrymq.errors import IncompleteSignature, MissingAuthenticationToken, RequestExpired, SignatureDoesNotMatch

KEY_ID, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
SIGNED_AT = datetime(2024, 3, 5, 12, 30, 0)  # naive UTC, as botocore keeps it
SIGNED_EPOCH = float(calendar.timegm(SIGNED_AT.timetuple()))
FORM = "application/x-www-form-urlencoded; charset=utf-8"
REGIONS = frozenset({"us-east-1", "eu-north-1"})
MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access "
    "Key and signing method. Consult the service documentation for details."
)


@dataclass
class Wire:
    """A signed request as the front end receives it: raw path and query, lower-case header names."""

    method: str
    path: str
    query_string: str
    headers: dict[str, str]
    body: bytes

    def parse(self) -> sigv4.SignedRequest:
        return sigv4.parse_signature(self.method, self.path, self.query_string, self.headers, regions=REGIONS)

    def verify(self, secret: str = SECRET, now: float = SIGNED_EPOCH, **kwargs: Any) -> sigv4.SignedRequest:
        signed = self.parse()
        sigv4.verify_signature(signed, secret, method=self.method, path=self.path, query_string=self.query_string,
                               headers=self.headers, body=self.body, now=now, **kwargs)
        return signed


@pytest.fixture(autouse=True)
def _botocore_signs_at_a_fixed_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda *args, **kwargs: SIGNED_AT)


def _sign(method: str, url: str, body: bytes = b"", headers: dict[str, str] | None = None, *,
          token: str | None = None, presign_expires: int | None = None, region: str = "us-east-1") -> Wire:
    credentials = Credentials(KEY_ID, SECRET, token)
    request = AWSRequest(method=method, url=url, data=body, headers=headers or {})
    if presign_expires is None:
        SigV4Auth(credentials, "sqs", region).add_auth(request)
    else:
        SigV4QueryAuth(credentials, "sqs", region, expires=presign_expires).add_auth(request)
    prepared = request.prepare()
    parts = urlsplit(prepared.url)
    wire_headers = {k.lower(): v for k, v in prepared.headers.items()}
    wire_headers.setdefault("host", parts.netloc)
    return Wire(prepared.method, parts.path or "/", parts.query, wire_headers, prepared.body or b"")


def _form_post(body: bytes = b"Action=SendMessage&MessageBody=hello%20world", **kwargs: Any) -> Wire:
    return _sign("POST", "http://localhost:9324/000000000000/q1", body, {"Content-Type": FORM}, **kwargs)


def _json_post(body: bytes = b'{"QueueUrl": "q", "MessageBody": "hi"}') -> Wire:
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"}
    return _sign("POST", "https://sqs.us-east-1.amazonaws.com/", body, headers)


# --- accepted ----------------------------------------------------------------------------------------


def test_header_signed_query_request_verifies() -> None:
    # given a form POST botocore signed
    wire = _form_post()
    # when its signature is parsed and verified with the right secret
    signed = wire.verify()
    # then it passes, and the credential scope is reported
    assert (signed.access_key_id, signed.date, signed.region, signed.service) == (KEY_ID, "20240305", "us-east-1",
                                                                                   "sqs")
    assert (signed.amz_date, signed.presigned, signed.expires, signed.timestamp) == (
        "20240305T123000Z", False, None, SIGNED_EPOCH)
    assert signed.signed_headers == ("content-type", "host", "x-amz-date")


def test_header_signed_json_request_verifies() -> None:
    assert "x-amz-target" in _json_post().verify().signed_headers


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:9324/000000000000/my%20queue",
        "http://localhost:9324/a/./b/../000000000000/q~1",
        "http://localhost:9324/000000000000/q1?Action=ReceiveMessage&AttributeName.2=All&AttributeName.1=x%2By%20z",
        "http://localhost:9324/?Action=ListQueues&QueueNamePrefix=%E2%82%AC&Flag",
        "http://localhost:9324",
    ],
)
def test_paths_and_query_strings_canonicalise_as_botocore_signs_them(url: str) -> None:
    _sign("GET", url).verify()


def test_session_token_is_signed_and_reported() -> None:
    signed = _form_post(token="session-token").verify()
    assert signed.security_token == "session-token"
    assert "x-amz-security-token" in signed.signed_headers


def test_headers_added_after_signing_are_ignored() -> None:
    wire = _form_post()
    wire.headers["user-agent"] = "changed-in-transit"
    wire.verify()


def test_header_whitespace_is_folded_before_comparing() -> None:
    # given a signed header whose value a proxy re-spaced
    wire = _sign("POST", "http://localhost:9324/", b"Action=ListQueues",
                 {"Content-Type": FORM, "X-Custom": "a  b"})
    wire.headers["x-custom"] = "  a b "
    # then it still verifies: values are trimmed and inner runs folded on both sides
    wire.verify()


def test_date_header_may_carry_the_timestamp() -> None:
    # given a request botocore signed with an HTTP Date header instead of X-Amz-Date
    wire = _sign("POST", "http://localhost:9324/", b"Action=ListQueues", {"Content-Type": FORM, "Date": "x"})
    assert "x-amz-date" not in wire.headers
    # then the date is read from it
    assert wire.verify().amz_date == "20240305T123000Z"


def test_every_served_region_may_scope_a_signature() -> None:
    assert _form_post(region="eu-north-1").verify().region == "eu-north-1"


def test_declared_payload_hash_must_be_the_bodys() -> None:
    # given a request signed with an explicit payload hash
    body = b"Action=ListQueues"
    wire = _sign("POST", "http://localhost:9324/", body,
                 {"Content-Type": FORM, "X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()})
    wire.verify()
    # when the body is changed but the declared hash kept
    wire.body = b"Action=DeleteQueue"
    # then it no longer verifies
    with pytest.raises(SignatureDoesNotMatch):
        wire.verify()


def test_presigned_url_verifies() -> None:
    # given a presigned GET
    wire = _sign("GET", "https://sqs.us-east-1.amazonaws.com/000000000000/q1?Action=ReceiveMessage",
                 presign_expires=300, token="tok")
    # then it verifies until it expires, and says how long it is valid
    signed = wire.verify(now=SIGNED_EPOCH + 299)
    assert (signed.presigned, signed.expires, signed.security_token) == (True, 300, "tok")


def test_signing_key_is_derived_once_per_scope() -> None:
    # given a cold cache
    sigv4._signer.cache_clear()
    sigv4._signing_key.cache_clear()
    _form_post().verify()
    _json_post().verify()
    # then the key was derived once, and the second verification reused the first one's keyed HMAC
    info = sigv4._signer.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    assert sigv4._signing_key.cache_info().misses == 1


# --- refused: tampering ------------------------------------------------------------------------------


def _assert_mismatch(wire: Wire, **kwargs: Any) -> None:
    with pytest.raises(SignatureDoesNotMatch) as caught:
        wire.verify(**kwargs)
    assert caught.value.message == MISMATCH


def test_tampered_body_is_refused() -> None:
    wire = _form_post()
    wire.body = b"Action=SendMessage&MessageBody=hello%20World"
    _assert_mismatch(wire)


def test_tampered_signed_header_is_refused() -> None:
    wire = _json_post()
    wire.headers["x-amz-target"] = "AmazonSQS.DeleteQueue"
    _assert_mismatch(wire)


def test_tampered_path_is_refused() -> None:
    wire = _form_post()
    wire.path = "/000000000000/q2"
    _assert_mismatch(wire)


def test_tampered_method_is_refused() -> None:
    wire = _sign("GET", "http://localhost:9324/?Action=ListQueues")
    wire.method = "DELETE"
    _assert_mismatch(wire)


def test_tampered_date_is_refused() -> None:
    # given a request whose timestamp was moved within the same day (so the scope still matches)
    wire = _form_post()
    wire.headers["x-amz-date"] = "20240305T123100Z"
    _assert_mismatch(wire)


def test_signature_with_foreign_characters_is_a_mismatch() -> None:
    wire = _form_post()
    wire.headers["authorization"] = re.sub("Signature=.*", "Signature=\u00e9\u00e9", wire.headers["authorization"])
    _assert_mismatch(wire)


def test_wrong_secret_is_refused() -> None:
    _assert_mismatch(_form_post(), secret="not-the-secret")


def test_unsigned_payload_is_refused_as_sqs_signs_every_body() -> None:
    # given a request declaring an unsigned payload, signed with that declaration (as an S3 signer would)
    body = b"Action=ListQueues"
    canonical_wire = _sign("POST", "http://localhost:9324/", body, {"Content-Type": FORM})
    wire = _sign("POST", "http://localhost:9324/", body,
                 {"Content-Type": FORM, "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"})
    # then it is a mismatch, whatever the body: SQS hashes the body itself
    _assert_mismatch(wire)
    wire.body = b"Action=ListQueues&QueueNamePrefix=x"
    _assert_mismatch(wire)
    canonical_wire.verify()


def test_declared_payload_hash_of_another_body_is_refused() -> None:
    # given a request whose declared hash is not its body's, though the signature covers the body sent
    body = b"Action=ListQueues"
    wire = _sign("POST", "http://localhost:9324/", body,
                 {"Content-Type": FORM, "X-Amz-Content-SHA256": hashlib.sha256(b"other").hexdigest()})
    _assert_mismatch(wire)


def test_tampered_presigned_query_is_refused() -> None:
    wire = _sign("GET", "https://sqs.us-east-1.amazonaws.com/000000000000/q1?Action=ReceiveMessage",
                 presign_expires=300)
    wire.query_string = wire.query_string.replace("ReceiveMessage", "PurgeQueue")
    _assert_mismatch(wire)


def test_presigned_expiry_cannot_be_extended() -> None:
    wire = _sign("GET", "https://sqs.us-east-1.amazonaws.com/?Action=ListQueues", presign_expires=60)
    wire.query_string = wire.query_string.replace("X-Amz-Expires=60", "X-Amz-Expires=3600")
    _assert_mismatch(wire, now=SIGNED_EPOCH + 120)


# --- refused: time -----------------------------------------------------------------------------------


def test_request_older_than_the_allowed_skew_has_expired() -> None:
    # given a request signed 16 minutes ago
    wire = _form_post()
    now = SIGNED_EPOCH + 16 * 60
    # then AWS's "Signature expired" message names the request time, the limit and now
    with pytest.raises(SignatureDoesNotMatch) as caught:
        wire.verify(now=now)
    assert caught.value.message == (
        "Signature expired: 20240305T123000Z is now earlier than 20240305T123100Z (20240305T124600Z - 15 min.)"
    )


def test_request_from_the_future_is_not_yet_current() -> None:
    with pytest.raises(SignatureDoesNotMatch) as caught:
        _form_post().verify(now=SIGNED_EPOCH - 20 * 60)
    assert caught.value.message == (
        "Signature not yet current: 20240305T123000Z is still later than 20240305T122500Z "
        "(20240305T121000Z + 15 min.)"
    )


def test_request_within_the_skew_is_accepted_either_way() -> None:
    _form_post().verify(now=SIGNED_EPOCH + 14 * 60)
    _form_post().verify(now=SIGNED_EPOCH - 14 * 60)


def test_skew_is_configurable() -> None:
    with pytest.raises(SignatureDoesNotMatch, match=re.escape("(20240305T123200Z - 1 min.)")):
        _form_post().verify(now=SIGNED_EPOCH + 120, max_skew_seconds=60)


def test_expired_presigned_url_is_refused() -> None:
    wire = _sign("GET", "https://sqs.us-east-1.amazonaws.com/?Action=ListQueues", presign_expires=60)
    with pytest.raises(RequestExpired, match=re.escape("Request has expired.")):
        wire.verify(now=SIGNED_EPOCH + 61)


# --- refused: malformed ------------------------------------------------------------------------------


def _headers(authorization: str | None, **extra: str) -> dict[str, str]:
    headers = {"host": "localhost", "x-amz-date": "20240305T123000Z", **extra}
    if authorization is not None:
        headers["authorization"] = authorization
    return headers


def _incomplete(headers: dict[str, str], query_string: str = "") -> str:
    with pytest.raises(IncompleteSignature) as caught:
        sigv4.parse_signature("POST", "/", query_string, headers, regions=REGIONS)
    return caught.value.message


def test_no_credentials_at_all_is_a_missing_token() -> None:
    with pytest.raises(MissingAuthenticationToken) as caught:
        sigv4.parse_signature("POST", "/", "Action=ListQueues", _headers(None), regions=REGIONS)
    assert caught.value.message == "Request is missing Authentication Token"


def test_authorization_header_missing_parts_names_them() -> None:
    header = f"AWS4-HMAC-SHA256 Credential={KEY_ID}/20240305/us-east-1/sqs/aws4_request"
    assert _incomplete(_headers(header)) == (
        "Authorization header requires 'Signature' parameter. "
        "Authorization header requires 'SignedHeaders' parameter. "
        f"Authorization={header}"
    )


def test_authorization_of_another_scheme_lacks_every_part() -> None:
    message = _incomplete({"authorization": "Bearer abc"})
    assert message == (
        "Authorization header requires 'Credential' parameter. "
        "Authorization header requires 'Signature' parameter. "
        "Authorization header requires 'SignedHeaders' parameter. "
        "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. "
        "Authorization=Bearer abc"
    )


_GOOD = (
    f"AWS4-HMAC-SHA256 Credential={KEY_ID}/20240305/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, "
    "Signature=abcd"
)


def test_date_that_is_not_iso8601_is_incomplete() -> None:
    message = _incomplete(_headers(_GOOD, **{"x-amz-date": "yesterday"}))
    assert message == (
        "Date must be in ISO-8601 'basic format'. Got 'yesterday'. See http://en.wikipedia.org/wiki/ISO_8601"
    )


def test_credential_of_the_wrong_shape_is_incomplete() -> None:
    message = _incomplete(_headers(_GOOD.replace("/us-east-1/sqs", "")))
    assert message == (
        "Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term, "
        f"got '{KEY_ID}/20240305/aws4_request'"
    )


def _mismatch(headers: dict[str, str], query_string: str = "") -> str:
    with pytest.raises(SignatureDoesNotMatch) as caught:
        sigv4.parse_signature("POST", "/", query_string, headers, regions=REGIONS)
    return caught.value.message


def test_host_must_be_signed() -> None:
    message = _mismatch(_headers(_GOOD.replace("host;", "")))
    assert message == "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization."


@pytest.mark.parametrize(
    ("header", "shown"),
    [
        ("x-amz-target", "X-Amz-Target"),
        ("content-type", "Content-Type"),
        ("x-amz-security-token", "X-Amz-Security-Token"),
        ("x-amz-content-sha256", "X-Amz-Content-Sha256"),
        ("x-amz-anything", "X-Amz-Anything"),
    ],
)
def test_content_type_and_every_amz_header_sent_must_be_signed(header: str, shown: str) -> None:
    # given a signature over host and x-amz-date only, when another meaningful header is sent
    message = _mismatch(_headers(_GOOD, **{header: "AmazonSQS.PurgeQueue"}))
    # then AWS's refusal names it
    assert message == f"'{shown}' must be a 'SignedHeader' in the AWS Authorization."


def test_amz_date_must_be_signed_when_it_dates_the_request() -> None:
    message = _mismatch(_headers(_GOOD.replace("host;x-amz-date", "host")))
    assert message == "'X-Amz-Date' must be a 'SignedHeader' in the AWS Authorization."


def test_headers_that_carry_no_meaning_or_come_from_aws_edges_may_go_unsigned() -> None:
    wire = _form_post()
    wire.headers.update({"x-amz-cf-id": "edge", "x-amzn-trace-id": "Root=1-2-3", "accept": "*/*"})
    wire.verify()


def test_presigned_url_must_sign_the_amz_headers_sent_with_it() -> None:
    wire = _sign("GET", "https://sqs.us-east-1.amazonaws.com/?Action=ListQueues", presign_expires=60)
    wire.headers["x-amz-target"] = "AmazonSQS.PurgeQueue"
    with pytest.raises(SignatureDoesNotMatch, match="'X-Amz-Target' must be a 'SignedHeader'"):
        wire.parse()


def test_two_authorization_headers_joined_by_a_comma_are_refused() -> None:
    # given two signed requests, whose Authorization headers arrive together (joined as HTTP joins repeats)
    first, second = _form_post(), _json_post()
    joined = f"{first.headers['authorization']},{second.headers['authorization']}"
    first.headers["authorization"] = joined
    # then the header is not a list of key=value pairs, as AWS reports it
    assert _incomplete(first.headers) == (
        f"'AWS4-HMAC-SHA256' not a valid key=value pair (missing equal-sign) in Authorization header: '{joined}'"
    )


def test_a_parameter_given_twice_is_refused() -> None:
    header = _GOOD + ", Signature=ffff"
    assert _incomplete(_headers(header)) == (
        f"Authorization header has more than one 'Signature' parameter. Authorization={header}"
    )


_PREFIX = f"Credential={KEY_ID}/20240305/us-east-1/sqs/aws4_request"


@pytest.mark.parametrize(
    "header",
    [
        _GOOD,
        f"  {_GOOD}",
        f"{_GOOD} ",
        _GOOD.replace(", ", ","),
        f"AWS4-HMAC-SHA256 {_PREFIX}, SignedHeaders=host;x-amz-date, Extra=1, Signature=abcd",
        f"AWS4-HMAC-SHA256 Signature=abcd, {_PREFIX}, SignedHeaders=host;x-amz-date",
        f"AWS4-HMAC-SHA256 {_PREFIX}, Signature=ab, SignedHeaders=host;x-amz-date, Signature=abcd",
        f"AWS4-HMAC-SHA256 {_PREFIX}, {_PREFIX}, SignedHeaders=host;x-amz-date, Signature=abcd",
        f"AWS4-HMAC-SHA256 {_PREFIX}, SignedHeaders=, Signature=abcd",
        f"AWS4-HMAC-SHA256 {_PREFIX}, SignedHeaders=host;x-amz-date, Signature=",
        f"AWS4-HMAC-SHA256 {_PREFIX}, SignedHeaders=host;x-amz-date, Signature=ab cd",
        f"AWS4-HMAC-SHA256 {_PREFIX}, SignedHeaders=host;x-amz-date, Signature=ab=cd",
        f"AWS4-HMAC-SHA256 {_PREFIX}, SignedHeaders=host;x-amz-date, Signature=\u00e9",
        f"AWS4-HMAC-SHA256 {_PREFIX} SignedHeaders, Signature=abcd",
        f"AWS4-HMAC-SHA256, {_PREFIX}, SignedHeaders=host;x-amz-date, Signature=abcd",
        "AWS4-HMAC-SHA256, Signature=abcd",
        f"AWS4-HMAC-SHA512 {_PREFIX}, SignedHeaders=host;x-amz-date, Signature=abcd",
        f"AWS4-HMAC-SHA256 {_PREFIX}, SignedHeaders=host;x-amz-date;x-amz-target, Signature=abcd",
    ],
)
@pytest.mark.parametrize("dated", [True, False])
def test_a_header_reads_the_same_with_its_head_read_once_as_pair_by_pair(
    header: str, dated: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a header read pair by pair, the way every header is read when its head is not one read before
    headers = _headers(header) if dated else {"host": "localhost", "authorization": header}

    def outcome() -> object:
        try:
            return sigv4.parse_signature("POST", "/", "", headers, regions=REGIONS)
        except (IncompleteSignature, SignatureDoesNotMatch) as exc:
            return type(exc).__name__, exc.message

    with monkeypatch.context() as patched:
        patched.setattr(sigv4, "_head_fields", lambda head: None)
        pair_by_pair = outcome()
    # then reading it with its head (all but the signature) read once and kept gives the same request or refusal,
    # the first time and from what was kept
    sigv4._head_fields.cache_clear()
    assert outcome() == pair_by_pair
    assert outcome() == pair_by_pair


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("/us-east-1/", "/eu-west-1/"), "Credential should be scoped to a valid region, not 'eu-west-1'. "),
        (("/us-east-1/", "/xx/"), "Credential should be scoped to a valid region, not 'xx'. "),
        (("/sqs/", "/sns/"), "Credential should be scoped to correct service: 'sqs'. "),
        (("aws4_request", "aws5_request"),
         "Credential should be scoped with a valid terminator: 'aws4_request', not 'aws5_request'."),
        (("/20240305/", "/20240304/"),
         "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
         "'20240304' != '20240305', from '20240305T123000Z'."),
    ],
)
def test_credential_scope_must_fit_the_request(change: tuple[str, str], message: str) -> None:
    assert _mismatch(_headers(_GOOD.replace(*change))) == message


def test_every_fault_of_the_scope_is_reported_at_once() -> None:
    header = _GOOD.replace("/20240305/us-east-1/sqs/aws4_request", "/20240304/xx/sns/aws5_request")
    assert _mismatch(_headers(header)) == (
        "Credential should be scoped to a valid region, not 'xx'. "
        "Credential should be scoped to correct service: 'sqs'. "
        "Credential should be scoped with a valid terminator: 'aws4_request', not 'aws5_request'. "
        "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
        "'20240304' != '20240305', from '20240305T123000Z'."
    )


def test_presigned_scope_must_name_a_served_region() -> None:
    wire = _sign("GET", "https://sqs.us-east-1.amazonaws.com/?Action=ListQueues", presign_expires=60,
                 region="ap-south-1")
    with pytest.raises(SignatureDoesNotMatch) as caught:
        wire.parse()
    assert caught.value.message == "Credential should be scoped to a valid region, not 'ap-south-1'. "


def test_presigned_query_missing_parameters_names_them() -> None:
    query = f"Action=ListQueues&X-Amz-Credential={KEY_ID}%2F20240305%2Fus-east-1%2Fsqs%2Faws4_request"
    assert _incomplete({"host": "h"}, query) == (
        "AWS query-string parameters must include 'X-Amz-Algorithm'. "
        "AWS query-string parameters must include 'X-Amz-Signature'. "
        "AWS query-string parameters must include 'X-Amz-Date'. "
        "AWS query-string parameters must include 'X-Amz-SignedHeaders'. "
        "AWS query-string parameters must include 'X-Amz-Expires'. "
        "Re-examine the query-string parameters."
    )


def test_presigned_validity_is_at_most_a_week() -> None:
    wire = _sign("GET", "https://sqs.us-east-1.amazonaws.com/?Action=ListQueues", presign_expires=60)
    query = wire.query_string.replace("X-Amz-Expires=60", "X-Amz-Expires=604801")
    assert "less than a week" in _incomplete(wire.headers, query)
