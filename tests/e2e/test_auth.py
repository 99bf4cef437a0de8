"""SigV4 authentication as clients meet it: wrong secrets, unknown keys, skewed clocks, presigned URLs."""

from __future__ import annotations

import datetime
import json
import urllib.error
import urllib.request
from typing import Any
from unittest import mock

import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support.errors import expect_error
from tests.support.sqs_clients import sqs_client


def test_wrong_secret_is_refused(stack: Any, protocol: str) -> None:
    client = sqs_client(stack.endpoint, protocol, access_key="test", secret_key="wrong")
    expect_error(client.list_queues, "SignatureDoesNotMatch", 403)


def test_unknown_access_key_is_refused(stack: Any, protocol: str) -> None:
    client = sqs_client(stack.endpoint, protocol, access_key="AKIAUNKNOWNUNKNOWN00", secret_key="x")
    expect_error(client.list_queues, "InvalidClientTokenId", 403)


def test_skewed_clock_is_refused(stack: Any, protocol: str) -> None:
    client = sqs_client(stack.endpoint, protocol)
    skewed = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=20)
    with mock.patch("botocore.auth.get_current_datetime", return_value=skewed.replace(tzinfo=None)):
        error = expect_error(client.list_queues, "SignatureDoesNotMatch", 403)
    assert "Signature expired" in error.response["Error"]["Message"]


def test_unsigned_request_is_refused(stack: Any) -> None:
    request = urllib.request.Request(
        f"{stack.endpoint}/", data=b"Action=ListQueues&Version=2012-11-05",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 403
    assert b"<Code>MissingAuthenticationToken</Code>" in caught.value.read()


def _signed_form(stack: Any, form: str, secret: str = "test") -> urllib.request.Request:
    request = AWSRequest(method="POST", url=f"{stack.endpoint}/", data=form.encode(),
                         headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
    SigV4Auth(Credentials("test", secret), "sqs", "us-east-1").add_auth(request)
    prepared = request.prepare()
    return urllib.request.Request(prepared.url, data=prepared.body, headers=dict(prepared.headers), method="POST")


def test_raw_signed_form_request_creates_and_lists(stack: Any) -> None:
    # given a hand-built query-protocol form, signed with SigV4
    form = "Action=CreateQueue&QueueName=raw-form-queue&Attribute.1.Name=DelaySeconds&Attribute.1.Value=2" \
           "&Version=2012-11-05"
    with urllib.request.urlopen(_signed_form(stack, form), timeout=10) as response:
        body = response.read().decode()
    # then SQS's XML comes back
    assert "<CreateQueueResponse" in body and "/000000000000/raw-form-queue</QueueUrl>" in body
    form = "Action=GetQueueAttributes&QueueUrl=" + f"{stack.endpoint}/000000000000/raw-form-queue".replace(
        ":", "%3A").replace("/", "%2F") + "&AttributeName.1=DelaySeconds&Version=2012-11-05"
    with urllib.request.urlopen(_signed_form(stack, form), timeout=10) as response:
        body = response.read().decode()
    assert "<Attribute><Name>DelaySeconds</Name><Value>2</Value></Attribute>" in body


def test_presigned_get_request(stack: Any) -> None:
    # given a presigned GET URL for ListQueues, as the query protocol allows
    request = AWSRequest(method="GET", url=f"{stack.endpoint}/?Action=ListQueues&Version=2012-11-05")
    SigV4QueryAuth(Credentials("test", "test"), "sqs", "us-east-1", expires=300).add_auth(request)
    with urllib.request.urlopen(request.prepare().url, timeout=10) as response:
        assert b"<ListQueuesResponse" in response.read()
    # when the signature is tampered with, then it is refused
    tampered = request.prepare().url.replace("X-Amz-Signature=", "X-Amz-Signature=0")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(tampered, timeout=10)
    assert caught.value.code == 403


def test_json_error_carries_query_error_header(stack: Any) -> None:
    request = AWSRequest(
        method="POST", url=f"{stack.endpoint}/",
        data=json.dumps({"QueueUrl": f"{stack.endpoint}/000000000000/does-not-exist"}).encode(),
        headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.GetQueueAttributes"},
    )
    SigV4Auth(Credentials("test", "test"), "sqs", "us-east-1").add_auth(request)
    prepared = request.prepare()
    raw = urllib.request.Request(prepared.url, data=prepared.body, headers=dict(prepared.headers), method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(raw, timeout=10)
    assert caught.value.code == 400
    assert caught.value.headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    assert json.loads(caught.value.read())["__type"] == "com.amazonaws.sqs#QueueDoesNotExist"


def test_created_credentials_work_and_see_only_their_account(stack: Any, protocol: str) -> None:
    key_id, secret = stack.create_credentials("111122223333", "alice")
    alice = sqs_client(stack.endpoint, protocol, access_key=key_id, secret_key=secret)
    url = alice.create_queue(QueueName=f"alice-{protocol}")["QueueUrl"]
    assert "/111122223333/" in url
    dev = sqs_client(stack.endpoint, protocol)
    expect_error(lambda: dev.send_message(QueueUrl=url, MessageBody="x"), "AccessDenied", 403)
