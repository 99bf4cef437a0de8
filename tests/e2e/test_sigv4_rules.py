"""SigV4 as AWS verifies it for SQS, rule by rule, with raw signed requests against ``ferrymq up``.

Each rule is shown both ways: the request signed as the rule wants is accepted, and the request that breaks it
gets AWS's error code, HTTP status and message, on both wire protocols where the protocol matters.  Key
revocation is shown against the running front end too: a key deleted or disabled with ``ferrymq credentials``
stops working within ``FERRYMQ_CREDENTIALS_RECHECK_SECONDS`` (2 s by default).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import time
import urllib.error
import urllib.request
import uuid
from typing import Any
from unittest import mock

import pytest
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ferrymq.settings import Settings
from tests.support.errors import expect_error
from tests.support.raw_sigv4 import RawRequest, RawResponse, Signer, send, sign, sqs_request
from tests.support.sqs_clients import sqs_client

MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access "
    "Key and signing method. Consult the service documentation for details."
)
INVALID_TOKEN = "The security token included in the request is invalid."
EXPIRED_TOKEN = "The security token included in the request is expired"
RECHECK_SECONDS = Settings().credentials_recheck_seconds
# Time for the request that notices a revocation: one version read and one key read on a busy machine.
REVOCATION_SLACK_SECONDS = 3.0


def _dev(stack: Any) -> Signer:
    return Signer(stack.access_key, stack.secret_key, stack.region)


def _signed_send(stack: Any, request: RawRequest, signer: Signer, **kwargs: Any) -> RawResponse:
    return send(stack.endpoint, request, sign(request, signer, **kwargs))


def _assert_refused(response: RawResponse, code: str, status: int, message: str) -> None:
    assert (response.status, response.error) == (status, (code, message)), response.body


def _list_queues(stack: Any, protocol: str) -> RawRequest:
    return sqs_request(stack.endpoint, protocol, "ListQueues", {})


def _queue_with_one_message(stack: Any, protocol: str) -> tuple[Any, str]:
    sqs = sqs_client(stack.endpoint, protocol)
    url = sqs.create_queue(QueueName=f"sigv4-{protocol}-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="kept")
    return sqs, url


def _visible(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def test_a_raw_signed_request_is_accepted(stack: Any, protocol: str) -> None:
    # the baseline every refusal below departs from by one change
    response = _signed_send(stack, _list_queues(stack, protocol), _dev(stack))
    assert response.status == 200, response.body


# --- credential scope ----------------------------------------------------------------------------------


@pytest.mark.parametrize("region", ["eu-nowhere-1", "xx"])
def test_a_scope_naming_a_region_the_server_does_not_serve_is_refused(stack: Any, protocol: str,
                                                                       region: str) -> None:
    signer = Signer(stack.access_key, stack.secret_key, region)
    response = _signed_send(stack, _list_queues(stack, protocol), signer)
    _assert_refused(response, "SignatureDoesNotMatch", 403,
                    f"Credential should be scoped to a valid region, not '{region}'. ")


def test_a_served_extra_region_is_accepted(stack: Any, protocol: str) -> None:
    response = _signed_send(stack, _list_queues(stack, protocol), Signer(stack.access_key, stack.secret_key,
                                                                         "eu-north-1"))
    assert response.status == 200, response.body


def test_a_scope_naming_another_service_is_refused(stack: Any, protocol: str) -> None:
    signer = Signer(stack.access_key, stack.secret_key, stack.region, service="sns")
    response = _signed_send(stack, _list_queues(stack, protocol), signer)
    _assert_refused(response, "SignatureDoesNotMatch", 403, "Credential should be scoped to correct service: 'sqs'. ")


def test_boto3_signing_for_an_unserved_region_gets_the_same_answer(stack: Any, protocol: str) -> None:
    client = sqs_client(stack.endpoint, protocol, region="eu-nowhere-1")
    expect_error(client.list_queues, "SignatureDoesNotMatch", 403,
                 message="Credential should be scoped to a valid region, not 'eu-nowhere-1'.")


# --- what must be signed -------------------------------------------------------------------------------


def test_an_unsigned_target_cannot_turn_a_read_into_a_purge(stack: Any) -> None:
    # given a queue holding a message, and a GetQueueAttributes request signed without its X-Amz-Target
    sqs, url = _queue_with_one_message(stack, "json")
    request = sqs_request(stack.endpoint, "json", "GetQueueAttributes", {"QueueUrl": url})
    request.unsigned = {"x-amz-target"}
    headers = sign(request, _dev(stack))
    # when the unsigned target is changed to PurgeQueue on the way
    headers = [(k, "AmazonSQS.PurgeQueue" if k == "X-Amz-Target" else v) for k, v in headers]
    response = send(stack.endpoint, request, headers)
    # then AWS's refusal, and the message is still there
    _assert_refused(response, "SignatureDoesNotMatch", 403,
                    "'X-Amz-Target' must be a 'SignedHeader' in the AWS Authorization.")
    assert _visible(sqs, url) == 1


@pytest.mark.parametrize(("header", "shown"), [("content-type", "Content-Type"), ("x-amz-date", "X-Amz-Date")])
def test_content_type_and_date_must_be_signed(stack: Any, protocol: str, header: str, shown: str) -> None:
    request = _list_queues(stack, protocol)
    request.unsigned = {header}
    _assert_refused(_signed_send(stack, request, _dev(stack)), "SignatureDoesNotMatch", 403,
                    f"'{shown}' must be a 'SignedHeader' in the AWS Authorization.")


def test_host_must_be_signed(stack: Any, protocol: str) -> None:
    request = _list_queues(stack, protocol)
    request.unsigned = {"host"}
    _assert_refused(_signed_send(stack, request, _dev(stack)), "SignatureDoesNotMatch", 403,
                    "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")


def test_an_amz_header_added_after_signing_is_refused(stack: Any, protocol: str) -> None:
    request = _list_queues(stack, protocol)
    headers = [*sign(request, _dev(stack)), ("X-Amz-Expected-Bucket-Owner", "111122223333")]
    _assert_refused(send(stack.endpoint, request, headers), "SignatureDoesNotMatch", 403,
                    "'X-Amz-Expected-Bucket-Owner' must be a 'SignedHeader' in the AWS Authorization.")


# --- the body ------------------------------------------------------------------------------------------


def _send_message(stack: Any, protocol: str, url: str, body: str) -> RawRequest:
    return sqs_request(stack.endpoint, protocol, "SendMessage", {"QueueUrl": url, "MessageBody": body})


def test_an_unsigned_payload_is_refused_so_a_body_cannot_be_swapped(stack: Any, protocol: str) -> None:
    # given a SendMessage signed with UNSIGNED-PAYLOAD, as S3 allows and SQS does not
    sqs, url = _queue_with_one_message(stack, protocol)
    signed = _send_message(stack, protocol, url, "signed body")
    signed.headers["X-Amz-Content-SHA256"] = "UNSIGNED-PAYLOAD"
    headers = sign(signed, _dev(stack), payload_hash="UNSIGNED-PAYLOAD")
    # when it is sent as signed, and again with another body
    swapped = _send_message(stack, protocol, url, "swapped body").body
    for body in (signed.body, swapped):
        # then each is refused, and neither body is stored
        _assert_refused(send(stack.endpoint, signed, headers, body), "SignatureDoesNotMatch", 403, MISMATCH)
    assert _visible(sqs, url) == 1


def test_a_declared_payload_hash_must_be_the_bodys(stack: Any, protocol: str) -> None:
    # given a SendMessage whose signed x-amz-content-sha256 is its body's
    sqs, url = _queue_with_one_message(stack, protocol)
    request = _send_message(stack, protocol, url, "declared")
    request.headers["X-Amz-Content-SHA256"] = hashlib.sha256(request.body).hexdigest()
    headers = sign(request, _dev(stack))
    # when the body is swapped, then it is refused
    swapped = _send_message(stack, protocol, url, "swapped").body
    _assert_refused(send(stack.endpoint, request, headers, swapped), "SignatureDoesNotMatch", 403, MISMATCH)
    assert _visible(sqs, url) == 1
    # and sent as signed, it is accepted
    assert send(stack.endpoint, request, headers).status == 200
    assert _visible(sqs, url) == 2


# --- the Authorization header --------------------------------------------------------------------------


def test_two_authorization_headers_are_refused(stack: Any, protocol: str) -> None:
    # given two valid signatures: a harmless request's and a purge's
    sqs, url = _queue_with_one_message(stack, protocol)
    purge = sqs_request(stack.endpoint, protocol, "PurgeQueue", {"QueueUrl": url})
    harmless = sign(sqs_request(stack.endpoint, protocol, "GetQueueAttributes", {"QueueUrl": url}), _dev(stack))
    headers = sign(purge, _dev(stack))
    # when the purge is sent with the other request's Authorization header as well
    headers.insert(0, next(h for h in harmless if h[0] == "Authorization"))
    response = send(stack.endpoint, purge, headers)
    # then it is refused as AWS refuses an Authorization header that is not one list of key=value pairs
    code, message = response.error
    assert (response.status, code) == (400, "IncompleteSignature"), response.body
    assert message.startswith(
        "'AWS4-HMAC-SHA256' not a valid key=value pair (missing equal-sign) in Authorization header: '"
    )
    assert _visible(sqs, url) == 1


# --- session tokens ------------------------------------------------------------------------------------


def _temporary(stack: Any, duration_seconds: int) -> dict[str, str]:
    created: dict[str, str] = json.loads(stack.ferrymq(
        "credentials", "create", "--account", "444455556666", "--user", "temp", "--temporary",
        "--duration-seconds", str(duration_seconds), "--json"))
    return created


def test_temporary_credentials_work_with_their_token_in_real_clients(stack: Any, protocol: str) -> None:
    created = _temporary(stack, 3600)
    assert created["AccessKeyId"].startswith("ASIA") and created["Expiration"]
    client = sqs_client(stack.endpoint, protocol, access_key=created["AccessKeyId"],
                        secret_key=created["SecretAccessKey"], session_token=created["SessionToken"])
    url = client.create_queue(QueueName=f"temp-{protocol}-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    assert "/444455556666/" in url


def test_temporary_credentials_without_their_token_are_refused(stack: Any, protocol: str) -> None:
    created = _temporary(stack, 3600)
    for token in (None, "bogus-token", created["SessionToken"] + "x"):
        signer = Signer(created["AccessKeyId"], created["SecretAccessKey"], session_token=token)
        _assert_refused(_signed_send(stack, _list_queues(stack, protocol), signer), "InvalidClientTokenId", 403,
                        INVALID_TOKEN)


def test_a_token_on_a_permanent_key_is_refused(stack: Any, protocol: str) -> None:
    signer = Signer(stack.access_key, stack.secret_key, session_token="bogus-token")
    _assert_refused(_signed_send(stack, _list_queues(stack, protocol), signer), "InvalidClientTokenId", 403,
                    INVALID_TOKEN)
    # and boto3 gets the same answer
    client = sqs_client(stack.endpoint, protocol, session_token="bogus-token")
    expect_error(client.list_queues, "InvalidClientTokenId", 403, message=INVALID_TOKEN)


def test_expired_temporary_credentials_get_expired_token(stack: Any, protocol: str) -> None:
    # given temporary credentials that live one second
    created = _temporary(stack, 1)
    expires = datetime.datetime.fromisoformat(created["Expiration"]).timestamp()
    time.sleep(max(0.0, expires - time.time()) + 1.0)
    # when they are used with their token, then ExpiredToken
    signer = Signer(created["AccessKeyId"], created["SecretAccessKey"], session_token=created["SessionToken"])
    response = _signed_send(stack, _list_queues(stack, protocol), signer)
    _assert_refused(response, "ExpiredToken", 403, EXPIRED_TOKEN)
    if protocol == "json":
        assert response.json_type == "com.amazon.coral.service#ExpiredTokenException"


# --- presigned URLs ------------------------------------------------------------------------------------


def _presigned(stack: Any, *, region: str = "us-east-1", key: tuple[str, str, str | None] = ("test", "test", None),
               expires: int = 300, signed_at: datetime.datetime | None = None) -> str:
    request = AWSRequest(method="GET", url=f"{stack.endpoint}/?Action=ListQueues&Version=2012-11-05")
    moment = (signed_at or datetime.datetime.now(datetime.UTC)).replace(tzinfo=None)
    with mock.patch("botocore.auth.get_current_datetime", return_value=moment):
        SigV4QueryAuth(Credentials(*key), "sqs", region, expires=expires).add_auth(request)
    return str(request.prepare().url)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def _query_error(body: bytes) -> tuple[str, str]:
    return RawResponse(400, {"content-type": "text/xml"}, body).error


def test_presigned_urls_follow_the_same_rules(stack: Any) -> None:
    # a presigned URL works ...
    assert _get(_presigned(stack))[0] == 200
    # ... but not scoped to an unserved region
    status, body = _get(_presigned(stack, region="eu-nowhere-1"))
    assert (status, _query_error(body)) == (
        403, ("SignatureDoesNotMatch", "Credential should be scoped to a valid region, not 'eu-nowhere-1'. "))
    # ... nor with an unsigned x-amz header sent along
    status, body = _get(_presigned(stack), {"X-Amz-Meta-Note": "added on the way"})
    assert (status, _query_error(body)) == (
        403, ("SignatureDoesNotMatch", "'X-Amz-Meta-Note' must be a 'SignedHeader' in the AWS Authorization."))
    # ... nor past its X-Amz-Expires
    old = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    status, body = _get(_presigned(stack, expires=60, signed_at=old))
    assert (status, _query_error(body)) == (400, ("RequestExpired", "Request has expired."))


def test_presigned_urls_of_temporary_credentials_need_the_token(stack: Any) -> None:
    created = _temporary(stack, 3600)
    key_id, secret = created["AccessKeyId"], created["SecretAccessKey"]
    assert _get(_presigned(stack, key=(key_id, secret, created["SessionToken"])))[0] == 200
    status, body = _get(_presigned(stack, key=(key_id, secret, None)))
    assert (status, _query_error(body)) == (403, ("InvalidClientTokenId", INVALID_TOKEN))


# --- revocation ----------------------------------------------------------------------------------------


def _seconds_until_refused(stack: Any, protocol: str, signer: Signer, bound: float) -> float:
    """Poll with raw requests from now until one is refused (InvalidClientTokenId); how long that took."""
    started = time.monotonic()
    while time.monotonic() - started < bound:
        response = _signed_send(stack, _list_queues(stack, protocol), signer)
        if response.status != 200:
            _assert_refused(response, "InvalidClientTokenId", 403, INVALID_TOKEN)
            return time.monotonic() - started
        time.sleep(0.05)
    pytest.fail(f"the key still worked {bound:.1f} s after it was revoked")


def test_a_deleted_key_stops_working_within_the_recheck_bound(stack: Any, protocol: str) -> None:
    # given a key whose use has cached it in the front end
    key_id, secret = stack.create_credentials("777788889999", f"revoked-{protocol}")
    signer = Signer(key_id, secret)
    assert _signed_send(stack, _list_queues(stack, protocol), signer).status == 200
    # when it is deleted with the admin command
    stack.ferrymq("credentials", "delete", key_id)
    # then requests signed with it are refused within the bound, and from then on
    took = _seconds_until_refused(stack, protocol, signer, RECHECK_SECONDS + REVOCATION_SLACK_SECONDS)
    print(f"\ndeleted key refused after {took:.2f} s ({protocol}; bound {RECHECK_SECONDS:.0f} s + one read)")
    for _ in range(3):
        _assert_refused(_signed_send(stack, _list_queues(stack, protocol), signer), "InvalidClientTokenId", 403,
                        INVALID_TOKEN)


def test_a_disabled_key_stops_working_and_an_enabled_one_works_again(stack: Any) -> None:
    key_id, secret = stack.create_credentials("777788889999", "disabled")
    signer = Signer(key_id, secret)
    assert _signed_send(stack, _list_queues(stack, "json"), signer).status == 200
    stack.ferrymq("credentials", "disable", key_id)
    took = _seconds_until_refused(stack, "json", signer, RECHECK_SECONDS + REVOCATION_SLACK_SECONDS)
    print(f"\ndisabled key refused after {took:.2f} s")
    listed = {k["AccessKeyId"]: k["Status"] for k in json.loads(stack.ferrymq("credentials", "list", "--json"))}
    assert listed[key_id] == "Inactive"
    # when it is enabled again, then it works again within the same bound
    stack.ferrymq("credentials", "enable", key_id)
    started = time.monotonic()
    while _signed_send(stack, _list_queues(stack, "query"), signer).status != 200:
        assert time.monotonic() - started < RECHECK_SECONDS + REVOCATION_SLACK_SECONDS, "the key stayed refused"
        time.sleep(0.05)
