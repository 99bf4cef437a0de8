"""Issue 9, SQS conformance second pass: each behaviour as AWS answers it, through boto3 on both protocols.

The expected answers (codes, statuses, wording, shapes and FIFO orders) are those recorded against AWS in
public SQS test suites (LocalStack's snapshot tests), and the SQS API Reference where they agree.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.support.errors import expect_error
from tests.support.sqs_clients import sqs_client


def _name(prefix: str, *, fifo: bool = False) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}" + (".fifo" if fifo else "")


def _fifo(sqs: Any, **attributes: str) -> str:
    return sqs.create_queue(QueueName=_name("c2", fifo=True), Attributes={"FifoQueue": "true", **attributes})[
        "QueueUrl"]


def _error(call: Any, query_code: str, status: int, message: str) -> None:
    error = expect_error(call, query_code, status).response["Error"]
    assert error["Message"] == message


def _bodies(response: dict) -> list[str]:
    return [m["Body"] for m in response.get("Messages", [])]


# --- 1: DelaySeconds=0 on a FIFO send --------------------------------------------------------------------


def test_fifo_send_with_delay_zero_is_accepted_and_the_queue_delay_applies(sqs: Any) -> None:
    # given a FIFO queue with a 2 s delay
    url = _fifo(sqs, DelaySeconds="2", ContentBasedDeduplication="true")
    # when messages are sent with DelaySeconds=0, alone and in a batch
    sqs.send_message(QueueUrl=url, MessageBody="one", MessageGroupId="g", DelaySeconds=0)
    batch = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a", "MessageBody": "two", "MessageGroupId": "g", "DelaySeconds": 0}])
    assert [e["Id"] for e in batch["Successful"]] == ["a"] and not batch.get("Failed")
    # then the queue's delay holds them back, and then both come in order
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    time.sleep(2.2)
    assert _bodies(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2)) == ["one", "two"]
    # and any other per-message delay is still refused, as AWS words it
    _error(lambda: sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g", DelaySeconds=2),
           "InvalidParameterValue", 400,
           "Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid "
           "for this queue type.")


# --- 2: PurgeQueue forgets deduplication ids -------------------------------------------------------------


def test_a_deduplication_id_sent_again_after_a_purge_is_a_new_message(sqs: Any) -> None:
    # given a FIFO message, purged
    url = _fifo(sqs)
    first = sqs.send_message(QueueUrl=url, MessageBody="before", MessageGroupId="g", MessageDeduplicationId="d-1")
    sqs.purge_queue(QueueUrl=url)
    # when the same deduplication id is sent again
    second = sqs.send_message(QueueUrl=url, MessageBody="after", MessageGroupId="g", MessageDeduplicationId="d-1")
    # then it is a new message, and it is delivered
    assert second["MessageId"] != first["MessageId"]
    assert int(second["SequenceNumber"]) > int(first["SequenceNumber"])
    assert _bodies(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2)) == ["after"]
    # and it deduplicates from then on
    third = sqs.send_message(QueueUrl=url, MessageBody="again", MessageGroupId="g", MessageDeduplicationId="d-1")
    assert third["MessageId"] == second["MessageId"]


# --- 3: FIFO redelivery within a group, and the order groups are served in --------------------------------


def test_a_reset_first_message_is_redelivered_while_later_ones_are_in_flight(sqs: Any) -> None:
    # given (AWS's recorded case) g1-m1, g1-m2 and g2-m1; g1-m1 and g1-m2 received
    url = _fifo(sqs, ContentBasedDeduplication="true")
    for body, group in (("g1-m1", "group-1"), ("g1-m2", "group-1"), ("g2-m1", "group-2")):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]
    assert _bodies({"Messages": received}) == ["g1-m1", "g1-m2"]
    # when g1-m1's visibility is reset
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=received[0]["ReceiptHandle"], VisibilityTimeout=0)
    # then the group never received comes first, then g1-m1 again; g1-m2, still in flight, does not come
    assert _bodies(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3, WaitTimeSeconds=2)) == ["g2-m1", "g1-m1"]


def test_groups_received_with_no_visibility_come_after_groups_never_received(sqs: Any) -> None:
    url = _fifo(sqs, ContentBasedDeduplication="true")
    for body in ("g1-m1", "g2-m1", "g2-m2", "g3-m1", "g1-m2"):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="group-" + body[1])
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3, VisibilityTimeout=0)
    assert _bodies(got) == ["g1-m1", "g1-m2", "g2-m1"]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    assert _bodies(got) == ["g3-m1", "g1-m1", "g1-m2", "g2-m1", "g2-m2"]


# --- 4: ChangeMessageVisibility just after the timeout ran out -------------------------------------------


@pytest.mark.parametrize("fifo", [False, True])
def test_changing_visibility_after_the_timeout_ran_out_is_accepted(sqs: Any, fifo: bool) -> None:
    # given a message received for 1 s, whose timeout has run out, not received since
    if fifo:
        url = _fifo(sqs, ContentBasedDeduplication="true")
        sqs.send_message(QueueUrl=url, MessageBody="late", MessageGroupId="g")
    else:
        url = sqs.create_queue(QueueName=_name("c2"))["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="late")
    handle = sqs.receive_message(QueueUrl=url, VisibilityTimeout=1)["Messages"][0]["ReceiptHandle"]
    time.sleep(1.3)
    # when a late heartbeat extends it, then that is accepted and the message stays hidden
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=30)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    batch = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "e", "ReceiptHandle": handle, "VisibilityTimeout": 0}])
    assert [e["Id"] for e in batch["Successful"]] == ["e"] and not batch.get("Failed")
    assert _bodies(sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)) == ["late"]


# --- 5: MessageAttributeNames "*" and prefixes -----------------------------------------------------------


def test_message_attribute_names_all_forms_and_prefixes(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("c2"))["QueueUrl"]
    attributes = {name: {"DataType": "String", "StringValue": value}
                  for name, value in (("General", "Kenobi"), ("Hello", "There"), ("Help.Me", "Me"))}
    sent = sqs.send_message(QueueUrl=url, MessageBody="msg", MessageAttributes=attributes)
    for everything in (["All"], [".*"], ["*"]):
        message = sqs.receive_message(QueueUrl=url, MessageAttributeNames=everything,
                                      VisibilityTimeout=0)["Messages"][0]
        assert message["MessageAttributes"] == attributes
        assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    message = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["Hel.*"], VisibilityTimeout=0)["Messages"][0]
    assert set(message["MessageAttributes"]) == {"Hello", "Help.Me"}
    # AWS's digest of just those two (recorded)
    assert message["MD5OfMessageAttributes"] == "83fee93c1bcd8b9a5a923ffacdc636c7"


# --- 6: X-Amzn-Trace-Id -------------------------------------------------------------------------------------


def test_the_trace_header_of_a_send_becomes_the_aws_trace_header_attribute(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("c2"))["QueueUrl"]
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"

    def add_trace(request: Any, **_: Any) -> None:
        request.headers["X-Amzn-Trace-Id"] = trace

    sqs.meta.events.register("before-sign.sqs.SendMessage", add_trace)
    try:
        sqs.send_message(QueueUrl=url, MessageBody="traced")
    finally:
        sqs.meta.events.unregister("before-sign.sqs.SendMessage", add_trace)
    message = sqs.receive_message(QueueUrl=url, AttributeNames=["AWSTraceHeader"])["Messages"][0]
    assert message["Attributes"] == {"AWSTraceHeader": trace}


# --- 7: FIFO batches with an entry missing its group or deduplication id ----------------------------------


def test_a_fifo_batch_with_an_entry_missing_a_group_id_fails_as_a_whole(sqs: Any) -> None:
    url = _fifo(sqs, ContentBasedDeduplication="false")
    entries = [
        {"Id": "ok", "MessageBody": "b", "MessageGroupId": "g", "MessageDeduplicationId": "d-1"},
        {"Id": "bad", "MessageBody": "b", "MessageDeduplicationId": "d-2"},
    ]
    _error(lambda: sqs.send_message_batch(QueueUrl=url, Entries=entries), "InvalidParameterValue", 400,
           "The request must contain the parameter MessageGroupId.")
    entries[1] = {"Id": "bad", "MessageBody": "b", "MessageGroupId": "g"}
    _error(lambda: sqs.send_message_batch(QueueUrl=url, Entries=entries), "InvalidParameterValue", 400,
           "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided "
           "explicitly")
    # and nothing of either batch was sent
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)


# --- 8: non-ASCII attribute names ----------------------------------------------------------------------------


def test_attribute_names_with_latin_letters_are_valid(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("c2"))["QueueUrl"]
    attributes = {"attr.1øßä": {"DataType": "String", "StringValue": "v"}}
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes=attributes)
    message = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"][0]
    assert message["MessageAttributes"] == attributes


# --- 9: a bare queue name as QueueUrl ------------------------------------------------------------------------


def test_a_bare_queue_name_names_the_callers_queue(sqs: Any) -> None:
    name = _name("c2")
    sqs.create_queue(QueueName=name)
    sqs.send_message(QueueUrl=name, MessageBody="by name")
    assert _bodies(sqs.receive_message(QueueUrl=name)) == ["by name"]
    assert sqs.get_queue_attributes(QueueUrl=name, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"].endswith(
        f":000000000000:{name}")
    expect_error(lambda: sqs.send_message(QueueUrl=_name("missing"), MessageBody="x"),
                 "AWS.SimpleQueueService.NonExistentQueue", 400)


# --- 11: FIFO-only attributes on standard queues ---------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"FifoQueue": "false"}, "Unknown Attribute FifoQueue."),
        ({"DeduplicationScope": "queue"}, "You can specify the DeduplicationScope only when FifoQueue is set to true."),
        ({"FifoThroughputLimit": "perQueue"},
         "You can specify the FifoThroughputLimit only when FifoQueue is set to true."),
        ({"ContentBasedDeduplication": "false"}, "Unknown Attribute ContentBasedDeduplication."),
    ],
)
def test_fifo_only_attributes_are_refused_on_a_standard_queue(sqs: Any, attributes: dict, message: str) -> None:
    _error(lambda: sqs.create_queue(QueueName=_name("c2"), Attributes=attributes), "InvalidAttributeName", 400,
           message)
    url = sqs.create_queue(QueueName=_name("c2"))["QueueUrl"]
    _error(lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes), "InvalidAttributeName", 400,
           message)


# --- 12: the query protocol over GET ----------------------------------------------------------------------


def _signed_get(stack: Any, path: str, query: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    request = AWSRequest(method="GET", url=f"{stack.endpoint}{path}" + (f"?{query}" if query else ""),
                         headers=headers or {})
    SigV4Auth(Credentials("test", "test"), "sqs", "us-east-1").add_auth(request)
    prepared = request.prepare()
    try:
        with urllib.request.urlopen(urllib.request.Request(prepared.url, headers=dict(prepared.headers)),
                                    timeout=10) as response:
            return response.status, response.read(), response.headers.get("content-type", "")
    except urllib.error.HTTPError as failed:
        return failed.code, failed.read(), failed.headers.get("content-type", "")


def test_query_get_accepting_json_is_answered_in_json(stack: Any) -> None:
    status, body, content_type = _signed_get(stack, "/", "Action=ListQueues&Version=2012-11-05",
                                             {"Accept": "application/json"})
    # the JSON form of the query response (issue 22 item 5; tests/e2e/test_conformance_3.py has its shape)
    assert status == 200 and content_type.startswith("application/json")
    assert list(json.loads(body)) == ["ListQueuesResponse"]
    status, body, _ = _signed_get(stack, "/", "Action=ListQueues&Version=2012-11-05")
    assert status == 200 and body.startswith(b"<?xml")


def test_query_get_of_a_queue_url_without_an_action_is_an_unknown_operation(stack: Any, sqs: Any) -> None:
    name = _name("c2")
    sqs.create_queue(QueueName=name)
    status, body, _ = _signed_get(stack, f"/000000000000/{name}", "")
    assert (status, body) == (404, b"<UnknownOperationException/>")


@pytest.mark.parametrize("action", ["CreateQueue", "ListQueues"])
def test_queue_less_actions_sent_to_a_queue_url_are_invalid(stack: Any, action: str) -> None:
    status, body, _ = _signed_get(stack, "/000000000000/some-queue", f"Action={action}&QueueName=x&Version=2012-11-05")
    assert status == 400 and b"<Code>InvalidAction</Code>" in body
    assert f"The action {action} is not valid for this endpoint.".encode() in body


# --- 13: response shapes -------------------------------------------------------------------------------------


def test_json_batch_results_leave_out_an_empty_failed_list(sqs: Any, protocol: str) -> None:
    url = sqs.create_queue(QueueName=_name("c2"))["QueueUrl"]
    http: dict[str, Any] = {}

    def keep(response_dict: dict, **_: Any) -> None:
        http["body"] = response_dict["body"]

    sqs.meta.events.register("before-parse.sqs.SendMessageBatch", keep)
    try:
        result = sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"}])
    finally:
        sqs.meta.events.unregister("before-parse.sqs.SendMessageBatch", keep)
    assert [e["Id"] for e in result["Successful"]] == ["a"] and not result.get("Failed")
    if protocol == "json":
        assert "Failed" not in json.loads(http["body"])


def test_removing_the_kms_key_removes_the_data_key_reuse_period(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("c2"), Attributes={
        "KmsMasterKeyId": "alias/aws/sqs", "KmsDataKeyReusePeriodSeconds": "6000"})["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["KmsDataKeyReusePeriodSeconds"] == "6000"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": ""})
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "KmsMasterKeyId" not in attributes and "KmsDataKeyReusePeriodSeconds" not in attributes


def test_sequence_numbers_are_large_increasing_20_digit_numbers(sqs: Any) -> None:
    url = _fifo(sqs, ContentBasedDeduplication="true")
    numbers = [int(sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId="g")["SequenceNumber"])
               for i in range(3)]
    assert all(len(str(n)) == 20 and n > 10**19 for n in numbers)
    assert numbers == sorted(numbers) and len(set(numbers)) == 3
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["SequenceNumber"])["Messages"]
    assert [int(m["Attributes"]["SequenceNumber"]) for m in got] == numbers


# --- 14: a DeduplicationScope change ---------------------------------------------------------------------
# Applies at once, as AWS applies it (issue 22 item 3): tests/e2e/test_conformance_3.py.


# --- wording ----------------------------------------------------------------------------------------------


def test_range_wording_of_receive_parameters(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("c2"))["QueueUrl"]
    _error(lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=21), "InvalidParameterValue", 400,
           "Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.")
    _error(lambda: sqs.receive_message(QueueUrl=url, VisibilityTimeout=43201), "InvalidParameterValue", 400,
           "Value 43201 for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.")
    _error(lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11), "InvalidParameterValue", 400,
           "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.")


@pytest.mark.parametrize("fifo", [False, True])
def test_create_queue_with_a_different_attribute_names_it(sqs: Any, fifo: bool) -> None:
    name = _name("c2", fifo=fifo)
    base = {"FifoQueue": "true"} if fifo else {}
    sqs.create_queue(QueueName=name, Attributes={**base, "DelaySeconds": "1"})
    _error(lambda: sqs.create_queue(QueueName=name, Attributes={**base, "DelaySeconds": "2"}),
           "QueueAlreadyExists", 400,
           "A queue already exists with the same name and a different value for attribute DelaySeconds")


def test_an_empty_string_attribute_is_refused_in_aws_words(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("c2"))["QueueUrl"]
    _error(lambda: sqs.send_message(QueueUrl=url, MessageBody="x",
                                    MessageAttributes={"Empty": {"DataType": "String", "StringValue": ""}}),
           "InvalidParameterValue", 400,
           "Message (user) attribute 'Empty' must contain a non-empty value of type 'String'.")


def test_move_task_wording(sqs: Any) -> None:
    _error(lambda: sqs.cancel_message_move_task(TaskHandle="not-a-handle"), "InvalidParameterValue", 400,
           "Value for parameter TaskHandle is invalid.")
    missing = f"arn:aws:sqs:us-east-1:000000000000:{_name('missing')}"
    _error(lambda: sqs.start_message_move_task(SourceArn=missing), "ResourceNotFoundException", 404,
           "The resource that you specified for the SourceArn parameter doesn't exist.")
    dlq = sqs.create_queue(QueueName=_name("c2-dlq"))["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sqs.create_queue(QueueName=_name("c2-src"), Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})})
    _error(lambda: sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=missing),
           "ResourceNotFoundException", 404,
           "The resource that you specified for the DestinationArn parameter doesn't exist.")


# --- 10: regions -----------------------------------------------------------------------------------------


def _regional(stack: Any, protocol: str, region: str) -> Any:
    return sqs_client(stack.endpoint, protocol, access_key=stack.access_key, secret_key=stack.secret_key,
                      region=region)


def test_each_region_has_its_own_queues(stack: Any, protocol: str) -> None:
    # given clients signing for two regions, each creating a queue of the same name
    west, north = _regional(stack, protocol, "us-west-1"), _regional(stack, protocol, "eu-north-1")
    name = _name("c2-region")
    west_url = west.create_queue(QueueName=name)["QueueUrl"]
    north_url = north.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
    # then they are two queues, with URLs and ARNs naming their regions (an IP endpoint: the path form)
    assert west_url == f"{stack.endpoint}/queue/us-west-1/000000000000/{name}"
    assert north_url == f"{stack.endpoint}/queue/eu-north-1/000000000000/{name}"
    assert west.get_queue_attributes(QueueUrl=west_url, AttributeNames=["QueueArn"])["Attributes"] == {
        "QueueArn": f"arn:aws:sqs:us-west-1:000000000000:{name}"}
    assert north.get_queue_attributes(QueueUrl=north_url, AttributeNames=["All"])["Attributes"]["QueueArn"] == (
        f"arn:aws:sqs:eu-north-1:000000000000:{name}")
    assert west.get_queue_url(QueueName=name)["QueueUrl"] == west_url
    assert north.get_queue_url(QueueName=name)["QueueUrl"] == north_url
    # when a message is sent in one region, then only that region's queue has it
    west.send_message(QueueUrl=west_url, MessageBody="west only")
    assert "Messages" not in north.receive_message(QueueUrl=north_url, WaitTimeSeconds=1)
    assert "Messages" not in north.receive_message(QueueUrl=name)
    assert _bodies(west.receive_message(QueueUrl=name, WaitTimeSeconds=2)) == ["west only"]
    # and each region lists its own queues only
    assert west.list_queues(QueueNamePrefix=name)["QueueUrls"] == [west_url]
    assert north.list_queues(QueueNamePrefix=name)["QueueUrls"] == [north_url]
    home = _regional(stack, protocol, "ap-south-1")
    assert "QueueUrls" not in home.list_queues(QueueNamePrefix=name)
    expect_error(lambda: home.get_queue_url(QueueName=name), "AWS.SimpleQueueService.NonExistentQueue", 400)


def test_a_dead_letter_queue_must_be_in_the_sources_region(stack: Any, protocol: str) -> None:
    west, north = _regional(stack, protocol, "us-west-1"), _regional(stack, protocol, "eu-north-1")
    dlq = north.create_queue(QueueName=_name("c2-dlq"))["QueueUrl"]
    dlq_arn = north.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})
    expect_error(lambda: west.create_queue(QueueName=_name("c2-src"), Attributes={"RedrivePolicy": policy}),
                 "InvalidParameterValue", 400, message="Dead letter target does not exist.")
    source = north.create_queue(QueueName=_name("c2-src"), Attributes={"RedrivePolicy": policy})["QueueUrl"]
    assert north.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [source]

# (Queue URLs in the host form: tests/e2e/test_conformance_3.py, on its stack of an operator's settings.)
