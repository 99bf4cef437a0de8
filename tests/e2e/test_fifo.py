"""FIFO queues through real boto3 clients, on both wire protocols."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.support.errors import expect_error


def _fifo(sqs: Any, **attributes: str) -> str:
    name = f"fifo-{uuid.uuid4().hex[:10]}.fifo"
    return sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true", **attributes})["QueueUrl"]


def _drain(sqs: Any, url: str, expected: int, **kwargs: Any) -> list[dict]:
    got: list[dict] = []
    for _ in range(20):
        batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, **kwargs)
        for message in batch.get("Messages", []):
            got.append(message)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if len(got) >= expected:
            break
    return got


def test_order_within_groups_and_sequence_numbers(sqs: Any) -> None:
    url = _fifo(sqs)
    sent = []
    for i in range(6):
        group = "a" if i % 2 == 0 else "b"
        result = sqs.send_message(QueueUrl=url, MessageBody=f"{group}{i}", MessageGroupId=group,
                                  MessageDeduplicationId=f"d{i}")
        sent.append(int(result["SequenceNumber"]))
        assert len(result["SequenceNumber"]) == 20
    assert sent == sorted(sent) and len(set(sent)) == 6
    got = _drain(sqs, url, 6, AttributeNames=["All"])
    for group in ("a", "b"):
        bodies = [m["Body"] for m in got if m["Attributes"]["MessageGroupId"] == group]
        assert bodies == sorted(bodies, key=lambda b: int(b[1:]))
    assert all(m["Attributes"]["SequenceNumber"] and m["Attributes"]["MessageDeduplicationId"] for m in got)


def test_group_is_locked_while_a_message_is_in_flight(sqs: Any) -> None:
    url = _fifo(sqs)
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId="g", MessageDeduplicationId=f"x{i}")
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"][0]
    assert first["Body"] == "m0"
    # while m0 is in flight, nothing later from its group is delivered
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    # once it is back (visibility 0), it comes first again
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in again] == ["m0", "m1", "m2"]


def test_deduplication_by_id_and_by_content(sqs: Any) -> None:
    url = _fifo(sqs, ContentBasedDeduplication="true")
    first = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    repeat = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    assert repeat["MessageId"] == first["MessageId"]
    explicit = sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g", MessageDeduplicationId="e1")
    assert explicit["MessageId"] != first["MessageId"]
    got = _drain(sqs, url, 2)
    assert sorted(m["MessageId"] for m in got) == sorted([first["MessageId"], explicit["MessageId"]])
    # a duplicate of a message already received and deleted is still dropped within the window
    sqs.send_message(QueueUrl=url, MessageBody="same", MessageGroupId="g")
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)


def test_deduplication_scope_message_group(sqs: Any) -> None:
    url = _fifo(sqs, DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId")
    one = sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g1", MessageDeduplicationId="same")
    two = sqs.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g2", MessageDeduplicationId="same")
    assert one["MessageId"] != two["MessageId"]
    assert len(_drain(sqs, url, 2)) == 2


def test_batch_send_on_fifo(sqs: Any) -> None:
    url = _fifo(sqs)
    entries = [
        {"Id": f"e{i}", "MessageBody": f"b{i}", "MessageGroupId": "g", "MessageDeduplicationId": f"bd{i}"}
        for i in range(5)
    ]
    # an entry without its group fails the whole request, as AWS answers it (issue 9, item 7)
    expect_error(lambda: sqs.send_message_batch(QueueUrl=url, Entries=[
        *entries, {"Id": "nogroup", "MessageBody": "x", "MessageDeduplicationId": "nd"}]), "InvalidParameterValue", 400,
        message="The request must contain the parameter MessageGroupId.")
    # an entry that is wrong in itself fails alone
    result = sqs.send_message_batch(QueueUrl=url, Entries=[
        *entries, {"Id": "badbody", "MessageBody": "\x01", "MessageGroupId": "g", "MessageDeduplicationId": "nd"}])
    assert [e["Id"] for e in result["Successful"]] == [f"e{i}" for i in range(5)]
    assert all(e["SequenceNumber"] for e in result["Successful"])
    assert [(f["Id"], f["Code"]) for f in result["Failed"]] == [("badbody", "InvalidMessageContents")]
    assert [m["Body"] for m in _drain(sqs, url, 5)] == [f"b{i}" for i in range(5)]


def test_receive_request_attempt_id_returns_the_same_messages(sqs: Any) -> None:
    url = _fifo(sqs)
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"r{i}", MessageGroupId=f"g{i}", MessageDeduplicationId=f"r{i}")
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, ReceiveRequestAttemptId="attempt-1")
    retry = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, ReceiveRequestAttemptId="attempt-1")
    assert [m["ReceiptHandle"] for m in retry["Messages"]] == [m["ReceiptHandle"] for m in first["Messages"]]
    other = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, ReceiveRequestAttemptId="attempt-2")
    assert [m["Body"] for m in other["Messages"]] == ["r2"]


@pytest.mark.parametrize(
    ("kwargs", "code", "message"),
    [
        ({}, "MissingParameter", "MessageGroupId"),
        ({"MessageGroupId": "g"}, "InvalidParameterValue", "ContentBasedDeduplication"),
        ({"MessageGroupId": "g", "MessageDeduplicationId": "d", "DelaySeconds": 5}, "InvalidParameterValue",
         "DelaySeconds"),
        ({"MessageGroupId": "g" * 129, "MessageDeduplicationId": "d"}, "InvalidParameterValue", "MessageGroupId"),
        ({"MessageGroupId": "g", "MessageDeduplicationId": "bad id"}, "InvalidParameterValue",
         "MessageDeduplicationId"),
    ],
)
def test_fifo_send_errors(sqs: Any, kwargs: dict, code: str, message: str) -> None:
    url = _fifo(sqs)
    expect_error(lambda: sqs.send_message(QueueUrl=url, MessageBody="x", **kwargs), code, 400, message=message)


def test_deduplication_id_on_standard_queue_is_refused(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=f"std-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    expect_error(lambda: sqs.send_message(QueueUrl=url, MessageBody="x", MessageDeduplicationId="d"),
                 "InvalidParameterValue", 400, message="MessageDeduplicationId")
