"""Issue 22, SQS conformance third pass: what users met first, each as AWS answers it, through boto3 on both
protocols (and raw signed GETs where only the query protocol over GET shows it).

The expected answers are AWS's as recorded in public SQS test suites (LocalStack's snapshot tests marked as
validated against AWS) and the SQS API Reference where they agree.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.e2e.conftest import Stack
from tests.support.errors import expect_error


def _name(prefix: str, *, fifo: bool = False) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}" + (".fifo" if fifo else "")


def _fifo(sqs: Any, **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=_name("c3", fifo=True), Attributes={"FifoQueue": "true", **attributes})[
        "QueueUrl"])


def _bodies(response: dict) -> list[str]:
    return [m["Body"] for m in response.get("Messages", [])]


# --- 4: a FIFO SendMessageBatch entry without MessageGroupId -----------------------------------------------


def test_a_fifo_batch_entry_without_a_group_id_fails_the_request_as_invalid(sqs: Any) -> None:
    url = _fifo(sqs)
    expect_error(
        lambda: sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": "a", "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "d-a"},
            {"Id": "b", "MessageBody": "y", "MessageDeduplicationId": "d-b"},
        ]),
        "InvalidParameterValue", 400, json_code="InvalidParameterValueException",
        message="The request must contain the parameter MessageGroupId.")
    # nothing of the batch was stored
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    # while a lone SendMessage without it is still MissingParameter
    expect_error(lambda: sqs.send_message(QueueUrl=url, MessageBody="x", MessageDeduplicationId="d"),
                 "MissingParameter", 400, message="The request must contain the parameter MessageGroupId.")


# --- 5: the query protocol over GET ------------------------------------------------------------------------


def _http_get(url: str, headers: dict[str, str]) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
            return response.status, response.read(), response.headers.get("content-type", "")
    except urllib.error.HTTPError as failed:
        return failed.code, failed.read(), failed.headers.get("content-type", "")


def _signed_get(stack: Stack, path: str, query: str, headers: dict[str, str]) -> tuple[int, bytes, str]:
    request = AWSRequest(method="GET", url=f"{stack.endpoint}{path}" + (f"?{query}" if query else ""),
                         headers=headers)
    SigV4Auth(Credentials(stack.access_key, stack.secret_key), "sqs", stack.region).add_auth(request)
    prepared = request.prepare()
    return _http_get(str(prepared.url), dict(prepared.headers))


def _presigned_get(stack: Stack, query: str, headers: dict[str, str]) -> tuple[int, bytes, str]:
    request = AWSRequest(method="GET", url=f"{stack.endpoint}/?{query}")
    SigV4QueryAuth(Credentials(stack.access_key, stack.secret_key), "sqs", stack.region, expires=300).add_auth(
        request)
    return _http_get(str(request.prepare().url), headers)


@pytest.mark.parametrize("accept", [None, "application/json"])
def test_a_get_without_an_action_is_an_unknown_operation_in_xml(stack: Stack, sqs: Any,
                                                                 accept: str | None) -> None:
    name = _name("c3-get")
    sqs.create_queue(QueueName=name)
    headers = {"Accept": accept} if accept else {}
    for path in (f"/000000000000/{name}", "/"):
        status, body, content_type = _signed_get(stack, path, "", headers)
        assert (status, body) == (404, b"<UnknownOperationException/>"), (path, body)
        assert content_type.startswith("text/xml")


def test_a_presigned_list_queues_accepting_json_gets_the_json_form_of_the_query_response(stack: Stack,
                                                                                          sqs: Any) -> None:
    # given a queue, and a presigned GET ListQueues of its name
    name = _name("c3-presigned")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    query = f"Action=ListQueues&Version=2012-11-05&QueueNamePrefix={name}"
    # when it is fetched asking for JSON
    status, body, content_type = _presigned_get(stack, query, {"Accept": "application/json"})
    # then the answer is the query response, as JSON
    assert status == 200 and content_type.startswith("application/json"), body
    document = json.loads(body)
    assert list(document) == ["ListQueuesResponse"]
    response = document["ListQueuesResponse"]
    assert response["ListQueuesResult"] == {"QueueUrls": [url]}
    assert response["ResponseMetadata"]["RequestId"]
    # and without asking, XML
    status, body, content_type = _presigned_get(stack, query, {})
    assert status == 200 and body.startswith(b"<?xml") and f"<QueueUrl>{url}</QueueUrl>".encode() in body


def test_a_query_error_accepting_json_gets_the_json_form_of_the_query_error(stack: Stack) -> None:
    status, body, content_type = _presigned_get(
        stack, "Action=GetQueueUrl&Version=2012-11-05&QueueName=no-such-queue-c3", {"Accept": "application/json"})
    assert status == 400 and content_type.startswith("application/json"), body
    document = json.loads(body)
    assert document["Error"] == {"Type": "Sender", "Code": "AWS.SimpleQueueService.NonExistentQueue",
                                 "Message": "The specified queue does not exist."}
    assert document["RequestId"]
