"""Throttling as SDKs meet it: a stack whose FIFO quota is one call per two seconds per action and queue.

The refusal must be SQS's error in each protocol, and one botocore backs off from rather than failing on.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.retries.standard import RetryContext, ThrottledRetryableChecker

from tests.e2e.conftest import Stack
from tests.support.errors import expect_error
from tests.support.sqs_clients import sqs_client
from tests.support.stack import started

HIGH_THROUGHPUT = {"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}


@pytest.fixture(scope="module")
def throttled_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from started(Path(tmp_path_factory.mktemp("throttled")) / "ferrymq", {
        "FERRYMQ_THROTTLE_FIFO_RATE": "1",
        "FERRYMQ_THROTTLE_FIFO_HIGH_THROUGHPUT_RATE": "1000",
    })


def _client(stack: Stack, protocol: str, **config: Any) -> Any:
    return sqs_client(stack.endpoint, protocol, access_key=stack.access_key, secret_key=stack.secret_key,
                      region=stack.region, **config)


def _fifo_queue(client: Any, **attributes: str) -> str:
    name = f"throttle-{uuid.uuid4().hex[:12]}.fifo"
    return client.create_queue(QueueName=name, Attributes={"FifoQueue": "true", **attributes})["QueueUrl"]


def _send(client: Any, url: str) -> Any:
    return client.send_message(QueueUrl=url, MessageBody="x", MessageGroupId="g",
                               MessageDeduplicationId=uuid.uuid4().hex)


def _until_throttled(client: Any, url: str, attempts: int = 5) -> ClientError:
    for _ in range(attempts):
        try:
            _send(client, url)
        except ClientError as error:
            return error
    raise AssertionError(f"{attempts} sends in a row were not throttled")


def test_a_fifo_queue_over_its_quota_answers_sqs_throttling_error(throttled_stack: Stack, protocol: str) -> None:
    # given a FIFO queue (not in high-throughput mode) and a client that does not retry
    client = _client(throttled_stack, protocol)
    url = _fifo_queue(client)
    _until_throttled(client, url)
    # when it sends again within the quota's period, then SQS's throttling error of the protocol comes back
    if protocol == "query":
        expect_error(lambda: _send(client, url), "RequestThrottled", 403, message="Request is throttled.")
    else:
        expect_error(lambda: _send(client, url), "Throttling", 400, json_code="ThrottlingException",
                     message="Rate exceeded")
    # and other actions on the queue are metered apart
    assert "Messages" in client.receive_message(QueueUrl=url, WaitTimeSeconds=1)
    # and once the bucket has refilled (one send a second), sending works again
    time.sleep(1.2)
    assert _send(client, url)["MessageId"]


def test_botocore_treats_the_refusal_as_throttling_and_backs_off(throttled_stack: Stack, protocol: str) -> None:
    client = _client(throttled_stack, protocol)
    url = _fifo_queue(client)
    error = _until_throttled(client, url)
    # then botocore's standard retry mode classes the parsed error as throttling
    assert ThrottledRetryableChecker().is_retryable(RetryContext(attempt_number=1, parsed_response=error.response))
    # and clients in its default (legacy) and standard modes retry it until the quota lets them through
    for mode in ("legacy", "standard"):
        retrying = _client(throttled_stack, protocol, retries={"mode": mode, "max_attempts": 6})
        sent: list[str] = []
        retrying.meta.events.register("before-send.sqs.SendMessage", lambda sent=sent, **_: sent.append("x"))
        _until_throttled(client, url)
        assert _send(retrying, url)["MessageId"]
        assert len(sent) >= 2, mode


def test_a_high_throughput_fifo_queue_has_the_higher_quota(throttled_stack: Stack, protocol: str) -> None:
    client = _client(throttled_stack, protocol)
    url = _fifo_queue(client, **HIGH_THROUGHPUT)
    for _ in range(8):
        _send(client, url)
    # when the queue leaves high-throughput mode, then the FIFO quota applies to it
    client.set_queue_attributes(QueueUrl=url, Attributes={"FifoThroughputLimit": "perQueue"})
    _until_throttled(client, url)


def test_standard_queues_are_not_held_to_the_fifo_quota(throttled_stack: Stack, protocol: str) -> None:
    client = _client(throttled_stack, protocol)
    url = client.create_queue(QueueName=f"throttle-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    for _ in range(8):
        client.send_message(QueueUrl=url, MessageBody="x")
