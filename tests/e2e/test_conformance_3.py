"""Issue 22, SQS conformance third pass: what users met first, each as AWS answers it, through boto3 on both
protocols (and raw signed GETs where only the query protocol over GET shows it).

The expected answers are AWS's as recorded in public SQS test suites (LocalStack's snapshot tests marked as
validated against AWS) and the SQS API Reference where they agree.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.e2e.conftest import Stack
from tests.support.errors import expect_error
from tests.support.sqs_clients import sqs_client
from tests.support.stack import started


def _name(prefix: str, *, fifo: bool = False) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}" + (".fifo" if fifo else "")


def _fifo(sqs: Any, **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=_name("c3", fifo=True), Attributes={"FifoQueue": "true", **attributes})[
        "QueueUrl"])


def _bodies(response: dict) -> list[str]:
    return [m["Body"] for m in response.get("Messages", [])]


# --- 1: every AWS region is served by default ------------------------------------------------------------


@pytest.mark.parametrize("region", ["eu-central-1", "us-west-1", "ap-southeast-2", "sa-east-1"])
def test_every_region_botocore_knows_is_served_by_default(stack: Stack, protocol: str, region: str) -> None:
    # given a client signing for a region nobody listed in FERRYMQ_REGIONS
    regional = sqs_client(stack.endpoint, protocol, region=region)
    # when it makes a queue there
    name = _name("c3-region")
    url = regional.create_queue(QueueName=name)["QueueUrl"]
    regional.send_message(QueueUrl=url, MessageBody="hello")
    # then the queue lives in that region, and only there
    assert regional.list_queues(QueueNamePrefix=name).get("QueueUrls") == [url]
    home = sqs_client(stack.endpoint, protocol, region=stack.region)
    assert "QueueUrls" not in home.list_queues(QueueNamePrefix=name)
    assert _bodies(regional.receive_message(QueueUrl=url)) == ["hello"]


@pytest.mark.parametrize("region", ["eu-fake-1", "xx", "us-east-1x"])
def test_a_made_up_region_is_still_refused(stack: Stack, protocol: str, region: str) -> None:
    client = sqs_client(stack.endpoint, protocol, region=region)
    expect_error(client.list_queues, "SignatureDoesNotMatch", 403,
                 message=f"Credential should be scoped to a valid region, not '{region}'.")


@pytest.fixture(scope="module")
def operator_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A stack whose operator narrowed the regions it serves to eu-central-1 and eu-north-1 (besides the home
    one) and chose queue URLs in the host form: one stack for the tests of either setting, neither of which
    changes what the other's test sees (and, last in this module, for a restart)."""
    yield from started(Path(tmp_path_factory.mktemp("operator-settings")), {
        "FERRYMQ_REGIONS": "eu-central-1,eu-north-1",
        "FERRYMQ_QUEUE_URL_FORM": "host",
    })


def test_ferrymq_regions_narrows_the_regions_served(operator_stack: Stack, protocol: str) -> None:
    for served in ("eu-central-1", "eu-north-1", operator_stack.region):
        assert "QueueUrls" not in sqs_client(operator_stack.endpoint, protocol, region=served).list_queues(
            QueueNamePrefix="none-")
    refused = sqs_client(operator_stack.endpoint, protocol, region="us-west-1")
    expect_error(refused.list_queues, "SignatureDoesNotMatch", 403,
                 message="Credential should be scoped to a valid region, not 'us-west-1'.")


def test_queue_urls_in_the_host_form(operator_stack: Stack, protocol: str) -> None:
    north = sqs_client(operator_stack.endpoint, protocol, access_key=operator_stack.access_key,
                       secret_key=operator_stack.secret_key, region="eu-north-1")
    name = _name("c2-host")
    url = north.create_queue(QueueName=name)["QueueUrl"]
    # then the region is in the host name, and the URL names the queue when given back
    host = operator_stack.endpoint.split("://", 1)[1]
    assert url == f"http://sqs.eu-north-1.{host}/000000000000/{name}"
    north.send_message(QueueUrl=url, MessageBody="hosted")
    assert _bodies(north.receive_message(QueueUrl=url, WaitTimeSeconds=2)) == ["hosted"]


# --- 2: ChangeMessageVisibility with an earlier receive's handle ---------------------------------------------


def test_change_visibility_with_an_earlier_receives_handle_applies_to_the_message(sqs: Any) -> None:
    # given a message received twice: first with VisibilityTimeout=0, then for 3 s
    url = sqs.create_queue(QueueName=_name("c3-vis"))["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=2)["Messages"][0]
    second = sqs.receive_message(QueueUrl=url, VisibilityTimeout=3)["Messages"][0]
    assert first["MessageId"] == second["MessageId"] and first["ReceiptHandle"] != second["ReceiptHandle"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    # when its visibility is ended with the first receive's handle
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    # then AWS accepts it, and the message can be received at once
    assert _bodies(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)) == ["m"]


def test_change_visibility_batch_with_an_earlier_receives_handle_succeeds(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("c3-vis"))["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=2)["Messages"][0]
    sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)
    result = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "a", "ReceiptHandle": first["ReceiptHandle"], "VisibilityTimeout": 0}])
    assert [e["Id"] for e in result["Successful"]] == ["a"] and not result.get("Failed")
    assert _bodies(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)) == ["m"]


def test_a_superseded_handle_of_a_fifo_message_has_expired(sqs: Any) -> None:
    # FIFO handles expire: a consumer whose receive was superseded cannot release the group's message
    url = _fifo(sqs, ContentBasedDeduplication="true")
    sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="g")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=2)["Messages"][0]
    sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)
    handle = first["ReceiptHandle"]
    error = expect_error(lambda: sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle,
                                                               VisibilityTimeout=0),
                         "InvalidParameterValue", 400).response["Error"]
    assert error["Message"] == (
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.")
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_a_superseded_handle_still_deletes_nothing(sqs: Any) -> None:
    # DeleteMessage keeps its own rule: an old handle succeeds, but the message stays
    url = sqs.create_queue(QueueName=_name("c3-vis"))["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=2)["Messages"][0]
    sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    assert _bodies(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)) == ["m"]


def test_change_visibility_of_a_deleted_message_names_its_reason(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("c3-vis"))["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0, WaitTimeSeconds=2)["Messages"][0]
    latest = sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"][0]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=latest["ReceiptHandle"])
    for handle in (first["ReceiptHandle"], latest["ReceiptHandle"]):
        error = expect_error(
            lambda h=handle: sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=h, VisibilityTimeout=0),
            "InvalidParameterValue", 400).response["Error"]
        assert error["Message"] == (
            f"Value {handle} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not "
            "available for visibility timeout change.")


def test_no_receipt_handle_error_has_an_empty_reason(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("c3-vis"))["QueueUrl"]
    for handle in ("garbage", "A" * 52, ""):
        for call in (lambda h=handle: sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=h,
                                                                     VisibilityTimeout=0),
                     lambda h=handle: sqs.delete_message(QueueUrl=url, ReceiptHandle=h)):
            with pytest.raises(Exception) as caught:
                call()
            message = caught.value.response["Error"]["Message"]  # type: ignore[attr-defined]
            assert not re.search(r"Reason:\s*\.?$", message), message


# --- 3: high-throughput FIFO switched on after creation ---------------------------------------------------


def test_a_deduplication_scope_change_applies_at_once(sqs: Any) -> None:
    # given a FIFO queue (queue scope) holding a message of group a with deduplication id d-1
    url = _fifo(sqs)
    first = sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="a", MessageDeduplicationId="d-1")
    # when high throughput is switched on
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DeduplicationScope": "messageGroup",
                                                        "FifoThroughputLimit": "perMessageGroupId"})
    # and d-1 comes again in another group
    other = sqs.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="b", MessageDeduplicationId="d-1")
    # then it is a new message, stored and delivered at once
    assert other["MessageId"] != first["MessageId"]
    assert int(other["SequenceNumber"]) > int(first["SequenceNumber"])
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    assert sorted(_bodies(got)) == ["a", "b"]
    # and from now on a deduplication id counts per group
    again = sqs.send_message(QueueUrl=url, MessageBody="b2", MessageGroupId="b", MessageDeduplicationId="d-1")
    assert again["MessageId"] == other["MessageId"]


def test_switching_back_to_queue_scope_applies_at_once(sqs: Any) -> None:
    url = _fifo(sqs, DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId")
    sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="a", MessageDeduplicationId="d-1")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"FifoThroughputLimit": "perQueue",
                                                        "DeduplicationScope": "queue"})
    one = sqs.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="b", MessageDeduplicationId="d-2")
    two = sqs.send_message(QueueUrl=url, MessageBody="c", MessageGroupId="c", MessageDeduplicationId="d-2")
    assert one["MessageId"] == two["MessageId"]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    assert sorted(_bodies(got)) == ["a", "b"]


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


# --- 6: FIFO sequence numbers ----------------------------------------------------------------------------


def _assert_aws_like(numbers: list[str]) -> None:
    for number in numbers:
        assert re.fullmatch(r"1[0-9]{19}", number), number
        # the old ones embedded twelve zeros (18000000000000057600)
        assert "0" * 8 not in number, number


def test_sequence_numbers_look_and_sort_like_aws(sqs: Any) -> None:
    # given a FIFO queue and two groups
    url = _fifo(sqs, ContentBasedDeduplication="true")
    sent: dict[str, list[str]] = {"g": [], "h": []}
    # when messages are sent alone and in batches, the groups interleaved
    for i in range(3):
        for group in ("g", "h"):
            sent[group].append(sqs.send_message(QueueUrl=url, MessageBody=f"{group}{i}",
                                                MessageGroupId=group)["SequenceNumber"])
    batch = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": f"{group}{i}", "MessageBody": f"{group}b{i}", "MessageGroupId": group}
        for i in range(2) for group in ("g", "h")])
    for entry in sorted(batch["Successful"], key=lambda e: int(e["Id"][1:])):
        sent[entry["Id"][0]].append(entry["SequenceNumber"])
    # then each is a 20-digit number without a long run of zeros, increasing within its group, and strings sort
    # as the numbers do
    for numbers in sent.values():
        _assert_aws_like(numbers)
        assert [int(n) for n in numbers] == sorted(int(n) for n in numbers) and len(set(numbers)) == len(numbers)
        assert sorted(numbers) == numbers
    # and received messages carry the same numbers
    got: dict[str, list[str]] = {"g": [], "h": []}
    for _ in range(10):
        response = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
        for message in response.get("Messages", []):
            got[message["Attributes"]["MessageGroupId"]].append(message["Attributes"]["SequenceNumber"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if sum(map(len, got.values())) == 10:
            break
    assert got == sent


def test_sequence_numbers_keep_increasing_across_a_restart(operator_stack: Stack) -> None:
    # (one protocol: the numbers are the worker's, whichever protocol carries them; the module's last test, as it
    # restarts the module's stack)
    def client() -> Any:
        return sqs_client(operator_stack.endpoint, "json", access_key=operator_stack.access_key,
                          secret_key=operator_stack.secret_key, region=operator_stack.region)

    sqs = client()
    url = _fifo(sqs, ContentBasedDeduplication="true")
    before = [sqs.send_message(QueueUrl=url, MessageBody=f"a{i}", MessageGroupId="g")["SequenceNumber"]
              for i in range(2)]
    operator_stack.restart()
    sqs = client()
    after = [sqs.send_message(QueueUrl=url, MessageBody=f"b{i}", MessageGroupId="g")["SequenceNumber"]
             for i in range(2)]
    numbers = before + after
    _assert_aws_like(numbers)
    assert [int(n) for n in numbers] == sorted(int(n) for n in numbers) and len(set(numbers)) == 4
