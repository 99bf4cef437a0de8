"""Message actions through real boto3 clients, on both wire protocols."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from typing import Any

import pytest

from tests.support.errors import expect_error


@pytest.fixture
def queue(sqs: Any) -> str:
    return sqs.create_queue(QueueName=f"msg-{uuid.uuid4().hex[:12]}")["QueueUrl"]


def test_send_receive_delete_round_trip(sqs: Any, queue: str) -> None:
    # given a message with a tricky body and attributes of every type
    body = 'line1\r\nline2 <&> "quoted" \'single\' é \U0001f600'
    attrs = {
        "s": {"DataType": "String", "StringValue": "v & <x>"},
        "n": {"DataType": "Number", "StringValue": "12.5"},
        "b": {"DataType": "Binary", "BinaryValue": b"\x00\xffbin"},
        "c": {"DataType": "String.custom", "StringValue": "custom"},
    }
    sent = sqs.send_message(QueueUrl=queue, MessageBody=body, MessageAttributes=attrs)
    assert sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest()
    # when it is received with everything asked for
    got = sqs.receive_message(QueueUrl=queue, MessageAttributeNames=["All"], AttributeNames=["All"],
                              WaitTimeSeconds=1)["Messages"]
    # then it arrives exactly as sent, with the digests SQS computes
    assert len(got) == 1
    message = got[0]
    assert message["MessageId"] == sent["MessageId"]
    assert message["Body"] == body
    assert message["MD5OfBody"] == sent["MD5OfMessageBody"]
    assert message["MessageAttributes"] == attrs
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    assert int(message["Attributes"]["SentTimestamp"]) <= int(message["Attributes"]["ApproximateFirstReceiveTimestamp"])
    assert message["Attributes"]["SenderId"]
    # when deleted, then it never comes back
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0)


def test_message_attribute_name_filters(sqs: Any, queue: str, protocol: str) -> None:
    attrs = {
        "app.id": {"DataType": "String", "StringValue": "1"},
        "app.kind": {"DataType": "String", "StringValue": "2"},
        "other": {"DataType": "Number", "StringValue": "3"},
    }
    sqs.send_message(QueueUrl=queue, MessageBody="x", MessageAttributes=attrs)
    message = sqs.receive_message(QueueUrl=queue, MessageAttributeNames=["app.*"], VisibilityTimeout=0)["Messages"][0]
    assert set(message["MessageAttributes"]) == {"app.id", "app.kind"}
    message = sqs.receive_message(QueueUrl=queue, MessageAttributeNames=["other"], VisibilityTimeout=0)["Messages"][0]
    assert set(message["MessageAttributes"]) == {"other"}
    message = sqs.receive_message(QueueUrl=queue, VisibilityTimeout=0)["Messages"][0]
    assert "MessageAttributes" not in message and "MD5OfMessageAttributes" not in message
    # The query-protocol model predates MessageSystemAttributeNames; there AttributeNames carries them.
    names = "MessageSystemAttributeNames" if protocol == "json" else "AttributeNames"
    message = sqs.receive_message(QueueUrl=queue, **{names: ["SentTimestamp"]})["Messages"][0]
    assert set(message["Attributes"]) == {"SentTimestamp"}


def test_visibility_timeout_hides_then_returns_message(sqs: Any, queue: str) -> None:
    sqs.send_message(QueueUrl=queue, MessageBody="hide")
    first = sqs.receive_message(QueueUrl=queue, VisibilityTimeout=1)["Messages"][0]
    assert "Messages" not in sqs.receive_message(QueueUrl=queue)
    again = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=5, AttributeNames=["ApproximateReceiveCount"])
    message = again["Messages"][0]
    assert message["MessageId"] == first["MessageId"]
    assert message["ReceiptHandle"] != first["ReceiptHandle"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "2"


def test_change_visibility(sqs: Any, queue: str) -> None:
    sqs.send_message(QueueUrl=queue, MessageBody="cv")
    message = sqs.receive_message(QueueUrl=queue, VisibilityTimeout=600)["Messages"][0]
    # when visibility is set to 0, then the message is at once receivable again
    sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    again = sqs.receive_message(QueueUrl=queue, VisibilityTimeout=600)["Messages"][0]
    assert again["MessageId"] == message["MessageId"]
    expect_error(lambda: sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=again["ReceiptHandle"],
                                                      VisibilityTimeout=43201), "InvalidParameterValue", 400)
    expect_error(lambda: sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle="garbage",
                                                      VisibilityTimeout=10), "ReceiptHandleIsInvalid", 404)
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=again["ReceiptHandle"])
    expect_error(lambda: sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=again["ReceiptHandle"],
                                                      VisibilityTimeout=10), "InvalidParameterValue", 400,
                 message="Message does not exist or is not available for visibility timeout change")


def test_delay_seconds_per_message_and_queue_default(sqs: Any, queue: str) -> None:
    sqs.send_message(QueueUrl=queue, MessageBody="late", DelaySeconds=2)
    assert "Messages" not in sqs.receive_message(QueueUrl=queue)
    assert sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=6)["Messages"][0]["Body"] == "late"
    expect_error(lambda: sqs.send_message(QueueUrl=queue, MessageBody="x", DelaySeconds=901),
                 "InvalidParameterValue", 400)


def test_long_poll_returns_as_soon_as_a_message_arrives(sqs: Any, queue: str) -> None:
    # given a receiver waiting up to 20 s on an empty queue
    sender = threading.Timer(1.0, lambda: sqs.send_message(QueueUrl=queue, MessageBody="wake"))
    started = time.monotonic()
    sender.start()
    try:
        got = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=20)
    finally:
        sender.join()
    # then the message arrives, well before the wait ran out
    assert got["Messages"][0]["Body"] == "wake"
    assert time.monotonic() - started < 15


def test_send_batch_with_per_entry_failures(sqs: Any, queue: str) -> None:
    result = sqs.send_message_batch(
        QueueUrl=queue,
        Entries=[
            {"Id": "ok1", "MessageBody": "one"},
            {"Id": "bad", "MessageBody": "bad \x00 char"},
            {"Id": "ok2", "MessageBody": "two", "DelaySeconds": 0},
        ],
    )
    assert sorted(e["Id"] for e in result["Successful"]) == ["ok1", "ok2"]
    assert [(f["Id"], f["Code"], f["SenderFault"]) for f in result["Failed"]] == [
        ("bad", "InvalidMessageContents", True)
    ]
    bodies = set()
    for _ in range(5):
        for m in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []):
            bodies.add(m["Body"])
    assert bodies == {"one", "two"}


def test_batch_request_errors(sqs: Any, queue: str) -> None:
    expect_error(lambda: sqs.send_message_batch(QueueUrl=queue, Entries=[]),
                 "AWS.SimpleQueueService.EmptyBatchRequest", 400, json_code="EmptyBatchRequest")
    expect_error(lambda: sqs.send_message_batch(
        QueueUrl=queue, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(11)]),
        "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400, json_code="TooManyEntriesInBatchRequest")
    expect_error(lambda: sqs.send_message_batch(
        QueueUrl=queue, Entries=[{"Id": "a", "MessageBody": "x"}, {"Id": "a", "MessageBody": "y"}]),
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400, json_code="BatchEntryIdsNotDistinct")
    expect_error(lambda: sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": "a b", "MessageBody": "x"}]),
                 "AWS.SimpleQueueService.InvalidBatchEntryId", 400, json_code="InvalidBatchEntryId")
    expect_error(lambda: sqs.send_message_batch(
        QueueUrl=queue, Entries=[{"Id": str(i), "MessageBody": "x" * 200_000} for i in range(6)]),
        "AWS.SimpleQueueService.BatchRequestTooLong", 400, json_code="BatchRequestTooLong")
    expect_error(lambda: sqs.delete_message_batch(QueueUrl=queue, Entries=[]),
                 "AWS.SimpleQueueService.EmptyBatchRequest", 400)


def test_message_size_limit(sqs: Any, queue: str) -> None:
    sqs.send_message(QueueUrl=queue, MessageBody="x" * 1_048_576)
    expect_error(lambda: sqs.send_message(QueueUrl=queue, MessageBody="x" * 1_048_577), "InvalidParameterValue", 400,
                 message="Message must be shorter than 1048576 bytes")
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"MaximumMessageSize": "1024"})
    expect_error(lambda: sqs.send_message(QueueUrl=queue, MessageBody="x" * 1025), "InvalidParameterValue", 400)
    got = sqs.receive_message(QueueUrl=queue)["Messages"][0]
    assert len(got["Body"]) == 1_048_576


def test_send_errors(sqs: Any, queue: str) -> None:
    expect_error(lambda: sqs.send_message(QueueUrl=queue, MessageBody="\x01"), "InvalidMessageContents", 400)
    expect_error(lambda: sqs.send_message(
        QueueUrl=queue, MessageBody="x", MessageAttributes={"a": {"DataType": "Number", "StringValue": "NaNx"}}),
        "InvalidParameterValue", 400)


def test_receive_parameter_errors(sqs: Any, queue: str) -> None:
    expect_error(lambda: sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=11), "InvalidParameterValue", 400)
    expect_error(lambda: sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=0), "InvalidParameterValue", 400)
    expect_error(lambda: sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=21), "InvalidParameterValue", 400)
    expect_error(lambda: sqs.receive_message(QueueUrl=queue, VisibilityTimeout=43201), "InvalidParameterValue", 400)


def test_delete_with_invalid_receipt_handle(sqs: Any, queue: str) -> None:
    expect_error(lambda: sqs.delete_message(QueueUrl=queue, ReceiptHandle="not-a-handle"),
                 "ReceiptHandleIsInvalid", 404, json_code="ReceiptHandleIsInvalid")


def test_delete_batch_and_change_visibility_batch(sqs: Any, queue: str) -> None:
    sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": str(i), "MessageBody": f"b{i}"} for i in range(3)])
    messages: list[dict] = []
    while len(messages) < 3:
        messages.extend(sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=600)
                        .get("Messages", []))
    changed = sqs.change_message_visibility_batch(
        QueueUrl=queue,
        Entries=[
            {"Id": "a", "ReceiptHandle": messages[0]["ReceiptHandle"], "VisibilityTimeout": 0},
            {"Id": "bad", "ReceiptHandle": "nope", "VisibilityTimeout": 0},
        ],
    )
    assert [e["Id"] for e in changed["Successful"]] == ["a"]
    assert [(f["Id"], f["Code"]) for f in changed["Failed"]] == [("bad", "ReceiptHandleIsInvalid")]
    deleted = sqs.delete_message_batch(
        QueueUrl=queue,
        Entries=[{"Id": f"d{i}", "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages[1:])]
        + [{"Id": "bad", "ReceiptHandle": "garbage"}],
    )
    assert sorted(e["Id"] for e in deleted["Successful"]) == ["d0", "d1"]
    assert [(f["Id"], f["Code"], f["SenderFault"]) for f in deleted["Failed"]] == [
        ("bad", "ReceiptHandleIsInvalid", True)
    ]
    left = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in left] == [messages[0]["Body"]]


def test_retention_period_is_stored_and_young_messages_kept(sqs: Any, queue: str) -> None:
    sqs.set_queue_attributes(QueueUrl=queue, Attributes={"MessageRetentionPeriod": "60"})
    sqs.send_message(QueueUrl=queue, MessageBody="keep")
    attrs = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["MessageRetentionPeriod"])["Attributes"]
    assert attrs["MessageRetentionPeriod"] == "60"
    assert sqs.receive_message(QueueUrl=queue)["Messages"][0]["Body"] == "keep"


def _md5_of_string_attributes(attributes: dict[str, str]) -> str:
    """SQS's documented attribute digest, written out independently for String values."""
    digest = hashlib.md5()
    for name in sorted(attributes):
        for part in (name.encode(), b"String"):
            digest.update(len(part).to_bytes(4, "big") + part)
        value = attributes[name].encode()
        digest.update(b"\x01" + len(value).to_bytes(4, "big") + value)
    return digest.hexdigest()


def test_aws_trace_header_system_attribute(sqs: Any, queue: str) -> None:
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    sent = sqs.send_message(QueueUrl=queue, MessageBody="traced", MessageSystemAttributes={
        "AWSTraceHeader": {"DataType": "String", "StringValue": trace}})
    assert sent["MD5OfMessageSystemAttributes"] == _md5_of_string_attributes({"AWSTraceHeader": trace})
    got = sqs.receive_message(QueueUrl=queue, AttributeNames=["AWSTraceHeader"])["Messages"][0]
    assert got["Attributes"] == {"AWSTraceHeader": trace}
    expect_error(lambda: sqs.send_message(QueueUrl=queue, MessageBody="x", MessageSystemAttributes={
        "AWSTraceHeader": {"DataType": "Number", "StringValue": "1"}}), "InvalidParameterValue", 400)


@pytest.mark.parametrize(
    "attributes",
    [
        {"AWS.reserved": {"DataType": "String", "StringValue": "v"}},
        {"bad..name": {"DataType": "String", "StringValue": "v"}},
        {"t": {"DataType": "Float", "StringValue": "1"}},
        {"n": {"DataType": "Number", "StringValue": "twelve"}},
        {"b": {"DataType": "Binary", "StringValue": "not binary"}},
        {f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)},
    ],
    ids=["reserved-prefix", "double-dot", "unknown-type", "not-a-number", "binary-as-string", "too-many"],
)
def test_invalid_message_attributes_are_refused(sqs: Any, queue: str, attributes: dict) -> None:
    expect_error(lambda: sqs.send_message(QueueUrl=queue, MessageBody="x", MessageAttributes=attributes),
                 "InvalidParameterValue", 400)
    assert "Messages" not in sqs.receive_message(QueueUrl=queue)
