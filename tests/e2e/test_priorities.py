"""Message priorities (``FerryMQPriorityLevels`` on the queue, ``FerryMQPriority`` on each message) through real
boto3 clients on both wire protocols: plain SQS clients use them by the attribute names alone.

Weights (``docs/design/priorities.md``): while several levels have visible messages, level k gets 2**k
deliveries for each of level 0, so with two levels the higher gets two in three.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter
from typing import Any

from tests.support.errors import expect_error
from tests.support.waiting import wait_for

LOW, HIGH = "0", "1"


def _queue(sqs: Any, prefix: str, **attributes: str) -> tuple[str, str]:
    name = f"{prefix}-{uuid.uuid4().hex[:10]}" + (".fifo" if attributes.get("FifoQueue") == "true" else "")
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def _priority(level: str) -> dict[str, Any]:
    return {"FerryMQPriority": {"DataType": "Number", "StringValue": level}}


def _send(sqs: Any, url: str, level: str, count: int, prefix: str | None = None) -> None:
    """``count`` messages of ``level``, bodies ``<prefix>-<i>`` (prefix: the level), ten per batch."""
    for start in range(0, count, 10):
        entries = [{"Id": str(i), "MessageBody": f"{prefix or level}-{i}", "MessageAttributes": _priority(level)}
                   for i in range(start, min(count, start + 10))]
        result = sqs.send_message_batch(QueueUrl=url, Entries=entries)
        assert len(result["Successful"]) == len(entries), result.get("Failed")


def _level(message: dict[str, Any]) -> str:
    return str(message["MessageAttributes"]["FerryMQPriority"]["StringValue"])


def test_the_levels_attribute_is_set_and_reported_like_ferrymqs_other_attributes(sqs: Any) -> None:
    # given a queue with four levels and one without
    url, _ = _queue(sqs, "prio-attr", FerryMQPriorityLevels="4")
    plain, _ = _queue(sqs, "prio-plain")
    # then by name each reports its count, and All shows it only where it is not the default
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["FerryMQPriorityLevels"])["Attributes"] == {
        "FerryMQPriorityLevels": "4"
    }
    assert sqs.get_queue_attributes(QueueUrl=plain, AttributeNames=["FerryMQPriorityLevels"])["Attributes"] == {
        "FerryMQPriorityLevels": "1"
    }
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]["FerryMQPriorityLevels"] == "4"
    assert "FerryMQPriorityLevels" not in sqs.get_queue_attributes(QueueUrl=plain, AttributeNames=["All"])["Attributes"]
    # and SetQueueAttributes changes it
    sqs.set_queue_attributes(QueueUrl=plain, Attributes={"FerryMQPriorityLevels": "2"})
    reported = sqs.get_queue_attributes(QueueUrl=plain, AttributeNames=["All"])["Attributes"]
    assert reported["FerryMQPriorityLevels"] == "2"


def test_bad_level_counts_and_fifo_queues_are_refused(sqs: Any) -> None:
    url, _ = _queue(sqs, "prio-bad")
    for value in ("0", "11", "many"):
        expect_error(lambda v=value: sqs.set_queue_attributes(QueueUrl=url, Attributes={"FerryMQPriorityLevels": v}),
                     "InvalidAttributeValue", 400, message="Invalid value for the parameter FerryMQPriorityLevels")
    expect_error(
        lambda: sqs.create_queue(QueueName=f"prio-{uuid.uuid4().hex[:8]}.fifo",
                                 Attributes={"FifoQueue": "true", "FerryMQPriorityLevels": "3"}),
        "InvalidAttributeValue", 400, message="FIFO queues deliver each message group in order",
    )


def test_a_level_out_of_range_or_of_the_wrong_type_is_refused(sqs: Any) -> None:
    # given a queue with three levels
    url, _ = _queue(sqs, "prio-check", FerryMQPriorityLevels="3")
    # then a single send of a level it does not have, or not a number, fails whole
    expect_error(lambda: sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes=_priority("3")),
                 "InvalidParameterValue", 400,
                 message="FerryMQPriority must be an integer from 0 to 2 (the queue has 3 priority levels).")
    expect_error(
        lambda: sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes={
            "FerryMQPriority": {"DataType": "String", "StringValue": "1"}}),
        "InvalidParameterValue", 400, message="FerryMQPriority must be of type Number",
    )
    # and in a batch only that entry fails
    result = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "ok", "MessageBody": "fine", "MessageAttributes": _priority("2")},
        {"Id": "bad", "MessageBody": "no", "MessageAttributes": _priority("-1")},
    ])
    assert [e["Id"] for e in result["Successful"]] == ["ok"]
    assert [(e["Id"], e["Code"], e["SenderFault"]) for e in result["Failed"]] == [("bad", "InvalidParameterValue",
                                                                                    True)]
    assert "from 0 to 2" in result["Failed"][0]["Message"]


def test_a_queue_without_levels_keeps_the_attribute_as_an_ordinary_one(sqs: Any) -> None:
    url, _ = _queue(sqs, "prio-off")
    sqs.send_message(QueueUrl=url, MessageBody="a", MessageAttributes={
        "FerryMQPriority": {"DataType": "String", "StringValue": "urgent"}})
    _send(sqs, url, "7", 1)
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    # in send order, attributes returned as sent (boto3 checks their MD5)
    assert [(m["Body"], _level(m)) for m in got] == [("a", "urgent"), ("7-0", "7")]


def test_the_higher_level_is_served_first_with_two_in_three(sqs: Any) -> None:
    # given twenty low messages sent before twenty high ones
    url, _ = _queue(sqs, "prio-order", FerryMQPriorityLevels="2")
    _send(sqs, url, LOW, 20)
    _send(sqs, url, HIGH, 20)
    # when ten are received
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["FerryMQPriority"],
                              VisibilityTimeout=300)["Messages"]
    # then a high one comes first, the high level has its two in three, and each level comes oldest first
    assert _level(got[0]) == HIGH
    assert Counter(_level(m) for m in got) == {HIGH: 7, LOW: 3}
    assert [m["Body"] for m in got if _level(m) == LOW] == ["0-0", "0-1", "0-2"]
    assert [m["Body"] for m in got if _level(m) == HIGH] == [f"1-{i}" for i in range(7)]


def test_under_load_the_low_level_keeps_its_share_while_the_high_level_stays_full(sqs: Any) -> None:
    # given a queue with a full high level and a full low level, and producers that keep the high level full
    url, _ = _queue(sqs, "prio-load", FerryMQPriorityLevels="2")
    _send(sqs, url, LOW, 400)
    _send(sqs, url, HIGH, 500)
    stop = threading.Event()
    errors: list[BaseException] = []

    def produce(n: int) -> None:
        try:
            batch = 0
            while not stop.is_set():
                _send(sqs, url, HIGH, 10, prefix=f"more-{n}-{batch}")
                batch += 1
        except BaseException as exc:
            errors.append(exc)

    received: list[str] = []
    lock = threading.Lock()

    def consume() -> None:
        try:
            while True:
                with lock:
                    if len(received) >= 600:
                        return
                got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                          MessageAttributeNames=["FerryMQPriority"]).get("Messages", [])
                if got:
                    sqs.delete_message_batch(QueueUrl=url, Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
                with lock:
                    received.extend(_level(m) for m in got)
        except BaseException as exc:
            errors.append(exc)

    producers = [threading.Thread(target=produce, args=(n,)) for n in range(2)]
    consumers = [threading.Thread(target=consume) for _ in range(4)]
    for t in producers + consumers:
        t.start()
    # when four consumers receive and delete 600 messages meanwhile
    for t in consumers:
        t.join()
    stop.set()
    for t in producers:
        t.join()
    assert not errors, errors
    # then both levels still had messages throughout (400 low, far more high than 600 * 2/3) ...
    shares = Counter(received)
    assert shares[LOW] < 400
    # ... and the low level got at least a quarter of what was received (its weight gives it a third), the
    # high level the most
    assert shares[LOW] >= 0.25 * len(received), shares
    assert shares[HIGH] >= 0.6 * len(received), shares


def test_a_message_keeps_its_level_into_the_dead_letter_queue_and_back(sqs: Any) -> None:
    # given a source and its dead-letter queue, both with three levels; the DLQ already holds a low message
    dlq_url, dlq_arn = _queue(sqs, "prio-dlq", FerryMQPriorityLevels="3")
    src_url, src_arn = _queue(sqs, "prio-src", FerryMQPriorityLevels="3",
                        RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}))
    _send(sqs, dlq_url, "0", 1, prefix="dlq-low")
    _send(sqs, src_url, "2", 1, prefix="poison")
    # when it is received once without delete, then moved by the next receive
    first = sqs.receive_message(QueueUrl=src_url, VisibilityTimeout=0, WaitTimeSeconds=2)["Messages"]
    assert [m["Body"] for m in first] == ["poison-0"]
    assert "Messages" not in sqs.receive_message(QueueUrl=src_url, WaitTimeSeconds=1)
    wait_for(lambda: sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["ApproximateNumberOfMessages"])
             ["Attributes"]["ApproximateNumberOfMessages"] == "2")
    # then in the DLQ it is served at its level, ahead of the older low message, with its attribute and count
    moved = sqs.receive_message(QueueUrl=dlq_url, AttributeNames=["ApproximateReceiveCount"], VisibilityTimeout=0,
                                MessageAttributeNames=["All"])["Messages"][0]
    assert moved["Body"] == "poison-0" and _level(moved) == "2"
    assert moved["Attributes"]["ApproximateReceiveCount"] == "2"
    # and a redrive back to the source keeps the attribute
    sqs.start_message_move_task(SourceArn=dlq_arn, DestinationArn=src_arn)
    back = wait_for(lambda: [m for m in sqs.receive_message(QueueUrl=src_url, MaxNumberOfMessages=10,
                                                            MessageAttributeNames=["All"]).get("Messages", [])
                             if m["Body"] == "poison-0"])
    assert _level(back[0]) == "2"
