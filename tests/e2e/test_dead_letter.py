"""Dead-letter queues and message move tasks through real boto3 clients, on both wire protocols."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.support.errors import expect_error
from tests.support.waiting import wait_for


def _queue(sqs: Any, prefix: str, fifo: bool = False, **attributes: str) -> tuple[str, str]:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}" + (".fifo" if fifo else "")
    if fifo:
        attributes["FifoQueue"] = "true"
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def _redrive(dlq_arn: str, count: int) -> str:
    return json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": count})


def _visible(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def test_message_received_too_often_moves_to_the_dead_letter_queue(sqs: Any) -> None:
    dlq_url, dlq_arn = _queue(sqs, "dlq")
    src_url, src_arn = _queue(sqs, "src", RedrivePolicy=_redrive(dlq_arn, 2))
    sent = sqs.send_message(QueueUrl=src_url, MessageBody="poison")
    # two receives without delete use up maxReceiveCount
    for _ in range(2):
        got = sqs.receive_message(QueueUrl=src_url, VisibilityTimeout=0, WaitTimeSeconds=2)["Messages"]
        assert got[0]["MessageId"] == sent["MessageId"]
    # the next receive moves it instead of returning it
    assert "Messages" not in sqs.receive_message(QueueUrl=src_url, WaitTimeSeconds=1)
    moved = sqs.receive_message(QueueUrl=dlq_url, AttributeNames=["All"], WaitTimeSeconds=2)["Messages"][0]
    assert moved["MessageId"] == sent["MessageId"] and moved["Body"] == "poison"
    assert moved["Attributes"]["DeadLetterQueueSourceArn"] == src_arn
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq_url)["queueUrls"] == [src_url]


def test_move_task_returns_messages_to_their_source(sqs: Any) -> None:
    dlq_url, dlq_arn = _queue(sqs, "mdlq")
    src_url, _ = _queue(sqs, "msrc", RedrivePolicy=_redrive(dlq_arn, 1))
    for i in range(3):
        sqs.send_message(QueueUrl=src_url, MessageBody=f"m{i}")
    for _ in range(10):
        sqs.receive_message(QueueUrl=src_url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    wait_for(lambda: _visible(sqs, dlq_url) == 3)
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=100)["TaskHandle"]
    done = wait_for(lambda: [t for t in sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
                              if t["Status"] == "COMPLETED"])
    assert done[0]["ApproximateNumberOfMessagesMoved"] == 3
    assert done[0]["ApproximateNumberOfMessagesToMove"] == 3
    bodies = set()
    for _ in range(10):
        for m in sqs.receive_message(QueueUrl=src_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []):
            bodies.add(m["Body"])
            sqs.delete_message(QueueUrl=src_url, ReceiptHandle=m["ReceiptHandle"])
        if len(bodies) == 3:
            break
    assert bodies == {"m0", "m1", "m2"}
    expect_error(lambda: sqs.cancel_message_move_task(TaskHandle=handle), "ResourceNotFoundException", 404)


def test_move_task_to_a_chosen_destination_can_be_cancelled(sqs: Any) -> None:
    dlq_url, dlq_arn = _queue(sqs, "cdlq")
    _queue(sqs, "csrc", RedrivePolicy=_redrive(dlq_arn, 1))
    dest_url, dest_arn = _queue(sqs, "cdst")
    sqs.send_message_batch(QueueUrl=dlq_url, Entries=[{"Id": str(i), "MessageBody": f"c{i}"} for i in range(10)])
    # one of them in a consumer's hands: the task waits for it, so it cannot finish before it is cancelled
    assert len(sqs.receive_message(QueueUrl=dlq_url, VisibilityTimeout=600)["Messages"]) == 1
    handle = sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=dest_arn,
                                         MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    expect_error(lambda: sqs.start_message_move_task(SourceArn=dlq_arn), "InvalidParameterValue", 400,
                 message="Only one active task is allowed")
    moved = sqs.cancel_message_move_task(TaskHandle=handle)["ApproximateNumberOfMessagesMoved"]
    assert moved < 10
    task = wait_for(lambda: [t for t in sqs.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=10)["Results"]
                              if t["Status"] == "CANCELLED"])[0]
    assert task["DestinationArn"] == dest_arn
    assert task["ApproximateNumberOfMessagesMoved"] < 10
    assert _visible(sqs, dest_url) == task["ApproximateNumberOfMessagesMoved"]


def test_move_task_errors(sqs: Any) -> None:
    _, plain_arn = _queue(sqs, "plain")
    expect_error(lambda: sqs.start_message_move_task(SourceArn=plain_arn), "InvalidParameterValue", 400)
    missing = plain_arn + "-missing"
    expect_error(lambda: sqs.start_message_move_task(SourceArn=missing), "ResourceNotFoundException", 404)
    expect_error(lambda: sqs.cancel_message_move_task(TaskHandle="not-a-handle"), "InvalidParameterValue", 400)


def test_fifo_source_needs_a_fifo_dead_letter_queue(sqs: Any) -> None:
    _, standard_arn = _queue(sqs, "stddlq")
    _, fifo_dlq_arn = _queue(sqs, "fifodlq", fifo=True)
    name = f"fsrc-{uuid.uuid4().hex[:10]}.fifo"
    expect_error(lambda: sqs.create_queue(QueueName=name, Attributes={
        "FifoQueue": "true", "RedrivePolicy": _redrive(standard_arn, 3)}), "InvalidAttributeName", 400)
    url = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true",
                                                       "RedrivePolicy": _redrive(fifo_dlq_arn, 3)})["QueueUrl"]
    policy = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])["Attributes"][
        "RedrivePolicy"])
    assert policy == {"deadLetterTargetArn": fifo_dlq_arn, "maxReceiveCount": 3}


def test_redrive_allow_policy_deny_all_is_enforced(sqs: Any) -> None:
    _, dlq_arn = _queue(sqs, "denied", RedriveAllowPolicy=json.dumps({"redrivePermission": "denyAll"}))
    expect_error(lambda: sqs.create_queue(QueueName=f"src-{uuid.uuid4().hex[:8]}",
                                          Attributes={"RedrivePolicy": _redrive(dlq_arn, 3)}),
                 "InvalidParameterValue", 400)
