"""The producer helper (ferrymq.producer) against a running stack: batching by count, size and linger time,
per-entry errors, retries with the same deduplication id, and the flush at interpreter exit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ferrymq.limits import MAX_BATCH_BYTES, MAX_MESSAGE_BYTES
from ferrymq.message_size import message_bytes
from ferrymq.producer import BatchEntryError, Producer
from tests.e2e.conftest import Stack, new_queue

RESULT_TIMEOUT = 15.0




def _record_calls(sqs: Any, operation: str) -> list[dict[str, Any]]:
    """The parameters of every ``operation`` call ``sqs`` makes from now on (once per call, not per retry)."""
    calls: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        calls.append(params)

    sqs.meta.events.register(f"provide-client-params.sqs.{operation}", record)
    return calls


def _drain(sqs: Any, url: str, expected: int, timeout: float = 15.0) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                     AttributeNames=["All"], MessageAttributeNames=["All"])
        for message in answer.get("Messages", []):
            got.append(message)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return got


def _counts(sqs: Any, url: str) -> tuple[int, int]:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])


def _sized(size: int, name: str = "pad") -> tuple[str, dict[str, Any]]:
    """A body and one string attribute that together count ``size`` bytes."""
    attributes = {name: {"DataType": "String", "StringValue": "é" * 50}}
    body = "x" * (size - message_bytes("", attributes))
    assert message_bytes(body, attributes) == size
    return body, attributes


def test_full_batches_leave_at_once_and_flush_sends_the_rest(sqs: Any) -> None:
    # given a producer that would linger far longer than the test
    url = new_queue(sqs, "sdk-count")
    calls = _record_calls(sqs, "SendMessageBatch")
    producer = Producer(url, client=sqs, linger_seconds=60)
    try:
        # when 25 messages are sent
        futures = [producer.send(f"m{i}") for i in range(25)]
        # then two full batches go without waiting for the linger time
        ids = [f.result(RESULT_TIMEOUT) for f in futures[:20]]
        assert [len(c["Entries"]) for c in calls] == [10, 10]
        assert not futures[20].done()
        # and flush sends the last five in a third
        assert producer.flush(RESULT_TIMEOUT)
        ids += [f.result(0) for f in futures[20:]]
        assert [len(c["Entries"]) for c in calls] == [10, 10, 5]
    finally:
        producer.close()
    assert len(set(ids)) == 25
    received = _drain(sqs, url, 25)
    assert sorted(m["Body"] for m in received) == sorted(f"m{i}" for i in range(25))
    assert {m["MessageId"] for m in received} == set(ids)


def test_batches_are_cut_at_the_size_limit_counted_as_sqs_counts(sdk: Any) -> None:
    # given messages that fill a batch to exactly 1 MiB, then one byte too many
    url = new_queue(sdk, "sdk-size")
    calls = _record_calls(sdk, "SendMessageBatch")
    first, first_attributes = _sized(600_000)
    second, second_attributes = _sized(MAX_BATCH_BYTES - 600_000, "other")
    with Producer(url, client=sdk, linger_seconds=60) as producer:
        # when they are sent
        exact = [producer.send(first, MessageAttributes=first_attributes),
                 producer.send(second, MessageAttributes=second_attributes),
                 producer.send("x")]
        producer.flush(RESULT_TIMEOUT)
        # then the first two make one batch the server takes, and the third starts a new one
        assert [len(c["Entries"]) for c in calls] == [2, 1]
        assert all(f.result(0) for f in exact)
        calls.clear()
        over = [producer.send(first, MessageAttributes=first_attributes),
                producer.send(second + "y", MessageAttributes=second_attributes)]
        producer.flush(RESULT_TIMEOUT)
        assert [len(c["Entries"]) for c in calls] == [1, 1]
        assert all(f.result(0) for f in over)
    received = _drain(sdk, url, 5)
    assert sorted(len(m["Body"]) for m in received) == sorted([1, len(first), len(first), len(second),
                                                               len(second) + 1])


def test_a_batch_that_is_not_full_leaves_after_the_linger_time(sdk: Any) -> None:
    url = new_queue(sdk, "sdk-linger")
    calls = _record_calls(sdk, "SendMessageBatch")
    with Producer(url, client=sdk, linger_seconds=0.3) as producer:
        started = time.monotonic()
        futures = [producer.send(f"l{i}") for i in range(3)]
        # no flush: the linger time alone sends them
        ids = [f.result(RESULT_TIMEOUT) for f in futures]
        waited = time.monotonic() - started
    assert len(calls) == 1 and len(calls[0]["Entries"]) == 3
    assert waited >= 0.25
    assert {m["MessageId"] for m in _drain(sdk, url, 3)} == set(ids)


def test_an_entry_the_server_refuses_fails_its_future_alone_and_is_not_retried(sdk: Any) -> None:
    url = new_queue(sdk, "sdk-entry-error")
    calls = _record_calls(sdk, "SendMessageBatch")
    with Producer(url, client=sdk, linger_seconds=60) as producer:
        good = producer.send("fine")
        bad = producer.send("late", DelaySeconds=1000)
        producer.flush(RESULT_TIMEOUT)
    assert good.result(0)
    with pytest.raises(BatchEntryError) as caught:
        bad.result(0)
    assert caught.value.code == "InvalidParameterValue"
    assert caught.value.sender_fault
    assert caught.value.response["Error"]["Message"] == (
        "Value 1000 for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900."
    )
    assert len(calls) == 1
    assert [m["Body"] for m in _drain(sdk, url, 1)] == ["fine"]


def test_an_entry_that_fails_a_whole_fifo_batch_gets_its_own_error(sdk: Any) -> None:
    # given a FIFO batch in which one entry lacks its group id, which fails the whole request
    url = new_queue(sdk, "sdk-whole", fifo=True, ContentBasedDeduplication="true")
    batch_calls = _record_calls(sdk, "SendMessageBatch")
    single_calls = _record_calls(sdk, "SendMessage")
    with Producer(url, client=sdk, linger_seconds=60) as producer:
        first = producer.send("a", MessageGroupId="g")
        orphan = producer.send("b")
        last = producer.send("c", MessageGroupId="g")
        producer.flush(RESULT_TIMEOUT)
    # then the others are stored, in order, and the orphan alone fails with the server's error
    assert first.result(0) and last.result(0)
    with pytest.raises(ClientError) as caught:
        orphan.result(0)
    assert caught.value.response["Error"]["Code"] == "MissingParameter"
    assert caught.value.response["Error"]["Message"] == "The request must contain the parameter MessageGroupId."
    assert len(batch_calls) == 1 and len(single_calls) == 3
    assert [m["Body"] for m in _drain(sdk, url, 2)] == ["a", "c"]


def test_a_message_too_big_for_any_batch_is_sent_alone_and_refused_as_sqs_refuses_it(sdk: Any) -> None:
    url = new_queue(sdk, "sdk-huge")
    batch_calls = _record_calls(sdk, "SendMessageBatch")
    with Producer(url, client=sdk, linger_seconds=60) as producer:
        huge = producer.send("h" * (MAX_MESSAGE_BYTES + 1))
        producer.flush(RESULT_TIMEOUT)
    with pytest.raises(ClientError) as caught:
        huge.result(0)
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert caught.value.response["Error"]["Message"] == (
        f"One or more parameters are invalid. Reason: Message must be shorter than {MAX_MESSAGE_BYTES} bytes."
    )
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert batch_calls == []


def _lose_acknowledgements(sqs: Any, times: int) -> Callable[[], int]:
    """Make the next ``times`` SendMessageBatch answers report every stored entry as failed through no fault of
    the sender, as an answer lost after the server stored the messages would; returns a count of them."""
    left = [times]

    def rewrite(parsed: dict[str, Any], **_: Any) -> None:
        if left[0] == 0 or not parsed.get("Successful"):
            return
        left[0] -= 1
        parsed["Failed"] = [*parsed.get("Failed", []), *(
            {"Id": s["Id"], "SenderFault": False, "Code": "InternalError", "Message": "lost"}
            for s in parsed["Successful"]
        )]
        parsed["Successful"] = []

    sqs.meta.events.register("after-call.sqs.SendMessageBatch", rewrite)
    return lambda: times - left[0]


def test_fifo_entries_are_retried_with_the_same_deduplication_id_and_stored_once(sdk: Any) -> None:
    # given a FIFO queue whose first two batch answers are lost after the messages were stored
    url = new_queue(sdk, "sdk-retry", fifo=True)
    calls = _record_calls(sdk, "SendMessageBatch")
    lost = _lose_acknowledgements(sdk, 2)
    with Producer(url, client=sdk, linger_seconds=60) as producer:
        futures = [producer.send(f"r{i}", MessageGroupId="g", MessageDeduplicationId=f"d{i}") for i in range(3)]
        producer.flush(RESULT_TIMEOUT)
        ids = [f.result(0) for f in futures]
    # then each entry went three times with its deduplication id, and each message is stored once
    assert lost() == 2 and len(calls) == 3
    for call in calls:
        assert [(e["MessageBody"], e["MessageDeduplicationId"]) for e in call["Entries"]] == [
            (f"r{i}", f"d{i}") for i in range(3)
        ]
    received = _drain(sdk, url, 3)
    assert [m["Body"] for m in received] == ["r0", "r1", "r2"]
    assert [m["MessageId"] for m in received] == ids
    assert _counts(sdk, url) == (0, 0)


def test_entries_failing_every_attempt_fail_their_futures(sdk: Any) -> None:
    url = new_queue(sdk, "sdk-give-up", fifo=True, ContentBasedDeduplication="true")
    calls = _record_calls(sdk, "SendMessageBatch")
    _lose_acknowledgements(sdk, 100)
    with Producer(url, client=sdk, linger_seconds=60, max_attempts=2) as producer:
        future = producer.send("doomed", MessageGroupId="g")
        producer.flush(RESULT_TIMEOUT)
    with pytest.raises(BatchEntryError) as caught:
        future.result(0)
    assert caught.value.code == "InternalError" and not caught.value.sender_fault
    assert len(calls) == 2


_EXITING_PRODUCER = textwrap.dedent(
    """
    import sys
    from ferrymq.producer import Producer

    producer = Producer(sys.argv[1], linger_seconds=3600)
    for i in range(7):
        producer.send(f"exit-{i}")
    print("sent", flush=True)
    """
)


def test_messages_waiting_at_interpreter_exit_are_flushed(sdk: Any, stack: Stack) -> None:
    # given a script that sends to a producer that lingers an hour, then ends without closing it
    url = new_queue(sdk, "sdk-atexit")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FERRYMQ_"))}
    env.update({"FERRYMQ_ENDPOINT_URL": stack.endpoint, "FERRYMQ_REGION": stack.region,
                "AWS_EC2_METADATA_DISABLED": "true"})
    result = subprocess.run([sys.executable, "-c", _EXITING_PRODUCER, url], env=env, capture_output=True,
                            text=True, timeout=60, check=False)
    # then it exits cleanly and every message is in the queue
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "sent"
    assert sorted(m["Body"] for m in _drain(sdk, url, 7)) == [f"exit-{i}" for i in range(7)]


def test_a_closed_producer_refuses_sends_and_unknown_fields_are_refused(sdk: Any) -> None:
    url = new_queue(sdk, "sdk-closed")
    producer = Producer(url, client=sdk)
    with pytest.raises(TypeError, match="MessageGroupID"):
        producer.send("x", MessageGroupID="g")
    producer.close()
    with pytest.raises(RuntimeError, match="closed"):
        producer.send("x")
