"""A FIFO send whose deduplication claim was written but whose message never reached a storage worker.

That is the state a front end leaves when it fails between its DynamoDB write and the worker's
acknowledgement. The test builds that state for real (the claim in DynamoDB, nothing on the worker), then
sends as the client's retry would: the message must be stored once, under the claimed id.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ferrymq.aws.dedup_store import DedupStore, dedup_key
from ferrymq.aws.queue_store import QueueStore
from tests.e2e.conftest import Stack
from tests.support.sqs_clients import sqs_client


def _aws_client(stack: Stack, service: str) -> Any:
    return stack.aws_client(service)


def test_retry_after_a_claimed_but_unsent_message_delivers_it_once(stack: Stack) -> None:
    sqs = sqs_client(stack.endpoint, "json")
    name = f"recover-{uuid.uuid4().hex[:8]}.fifo"
    url = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true"})["QueueUrl"]
    dynamodb = _aws_client(stack, "dynamodb")
    prefix = stack.env.get("FERRYMQ_TABLE_PREFIX", "ferrymq-")
    queue = QueueStore(dynamodb, f"{prefix}queues").get("000000000000", name)
    assert queue is not None
    # given: a first attempt claimed the deduplication id and then failed before the worker stored anything
    claimed_id = str(uuid.uuid4())
    store = DedupStore(dynamodb, f"{prefix}dedup")
    assert store.claim(dedup_key(queue.queue_id, None, "order-1"), claimed_id, time.time()) == claimed_id
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    # when the client retries the send, and retries once more
    retry = sqs.send_message(QueueUrl=url, MessageBody="order", MessageGroupId="g", MessageDeduplicationId="order-1")
    again = sqs.send_message(QueueUrl=url, MessageBody="order", MessageGroupId="g", MessageDeduplicationId="order-1")
    # then the message is stored exactly once, under the id the first attempt claimed
    assert retry["MessageId"] == again["MessageId"] == claimed_id
    assert retry["SequenceNumber"] == again["SequenceNumber"]
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
    assert [(m["MessageId"], m["Body"]) for m in got] == [(claimed_id, "order")]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
