"""The in-flight quota (OverLimit) on a stack whose operator lowered it, on both wire protocols."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Stack
from tests.support.errors import expect_error
from tests.support.sqs_clients import sqs_client
from tests.support.stack import started


@pytest.fixture(scope="module")
def limited_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from started(Path(tmp_path_factory.mktemp("limited")),
                       extra_env={"FERRYMQ_MAX_IN_FLIGHT_STANDARD": "3", "FERRYMQ_MAX_IN_FLIGHT_FIFO": "2"})


@pytest.mark.parametrize("fifo", [False, True])
def test_short_poll_over_the_in_flight_limit_is_refused(limited_stack: Stack, protocol: str, fifo: bool) -> None:
    sqs = sqs_client(limited_stack.endpoint, protocol)
    limit = 2 if fifo else 3
    name = f"limit-{uuid.uuid4().hex[:8]}" + (".fifo" if fifo else "")
    url = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"} if fifo else {})["QueueUrl"]
    extra: dict[str, Any] = {}
    for i in range(limit + 2):
        if fifo:
            extra = {"MessageGroupId": f"g{i}", "MessageDeduplicationId": f"d{i}"}
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", **extra)
    # given the queue at its in-flight limit
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=limit, VisibilityTimeout=600)["Messages"]
    assert len(received) == limit
    # when one more short poll comes, then OverLimit; a long poll instead just finds nothing
    expect_error(lambda: sqs.receive_message(QueueUrl=url), "OverLimit", 403, message="Too many messages")
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
    # and once one is deleted, receiving works again
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received[0]["ReceiptHandle"])
    assert len(sqs.receive_message(QueueUrl=url, VisibilityTimeout=600)["Messages"]) == 1
