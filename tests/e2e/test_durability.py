"""Durability of the whole stack: kill -9 every process, start again, nothing acknowledged is lost."""

from __future__ import annotations

import time
from typing import Any

from tests.support.sqs_clients import sqs_client


def test_state_survives_kill_9_of_every_process(private_stack: Any) -> None:
    sqs = sqs_client(private_stack.endpoint, "json")
    # given a queue with messages: some deleted, some in flight for a long time, some waiting
    url = sqs.create_queue(QueueName="durable", Attributes={"VisibilityTimeout": "5"})["QueueUrl"]
    key_id, secret = private_stack.create_credentials("444455556666", "bob")
    sent = {}
    for start in range(0, 30, 10):
        batch = [{"Id": str(i), "MessageBody": f"body-{i}",
                  "MessageAttributes": {"n": {"DataType": "Number", "StringValue": str(i)}}}
                 for i in range(start, start + 10)]
        for entry in sqs.send_message_batch(QueueUrl=url, Entries=batch)["Successful"]:
            sent[entry["MessageId"]] = f"body-{entry['Id']}"
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)["Messages"]
    deleted = {m["MessageId"] for m in received[:5]}
    for m in received[:5]:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    in_flight = {m["MessageId"] for m in received[5:]}
    # when every process is killed with SIGKILL and the stack started again on the same data
    private_stack.kill9_all()
    private_stack.restart()
    sqs = sqs_client(private_stack.endpoint, "json")
    url = sqs.get_queue_url(QueueName="durable")["QueueUrl"]
    # then the queue, its attributes and the created credentials are still there
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"] == {
        "VisibilityTimeout": "5"
    }
    bob = sqs_client(private_stack.endpoint, "json", access_key=key_id, secret_key=secret)
    assert "QueueUrls" not in bob.list_queues()
    # and every undeleted message comes back exactly as sent; in-flight ones stay hidden; deleted ones never return
    seen: dict[str, Any] = {}
    deadline = time.monotonic() + 30
    while len(seen) < len(sent) - len(deleted) - len(in_flight) and time.monotonic() < deadline:
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                     MessageAttributeNames=["All"], VisibilityTimeout=600).get("Messages", []):
            seen[m["MessageId"]] = m
    assert set(seen) == set(sent) - deleted - in_flight
    for message_id, message in seen.items():
        assert message["Body"] == sent[message_id]
        assert message["MessageAttributes"]["n"]["StringValue"] == message["Body"].removeprefix("body-")
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)
