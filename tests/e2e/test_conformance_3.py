"""Issue 22, SQS conformance third pass: what users met first, each as AWS answers it, through boto3 on both
protocols (and raw signed GETs where only the query protocol over GET shows it).

The expected answers are AWS's as recorded in public SQS test suites (LocalStack's snapshot tests marked as
validated against AWS) and the SQS API Reference where they agree.
"""

from __future__ import annotations

import uuid
from typing import Any

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
