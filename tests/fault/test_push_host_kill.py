"""kill -9 of the push host delivering a mapping, under load: every message sent is delivered at least once,
none is lost, and another push host takes the mapping over within its lease (the time until deliveries resume is
printed, not asserted). SIGTERM of that host lets the delivery under way finish and its messages be deleted."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import ferrymq
from tests.e2e.conftest import Stack, new_queue
from tests.support.push_receiver import receiving
from tests.support.stack import started
from tests.support.waiting import wait_for

LEASE_SECONDS = 3
MESSAGES = 300


@pytest.fixture(scope="module")
def push_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from started(tmp_path_factory.mktemp("push-fault"), {"FERRYMQ_PUSH_LEASE_SECONDS": str(LEASE_SECONDS)})


def lease_owner(stack: Stack, mapping_id: str) -> str | None:
    dynamodb = stack.aws_client("dynamodb")
    table = f"{stack.env.get('FERRYMQ_TABLE_PREFIX', 'ferrymq-')}event-source-mappings"
    for page in dynamodb.get_paginator("scan").paginate(TableName=table):
        for item in page["Items"]:
            if item.get("uuid", {}).get("S") == mapping_id and "lease_owner" in item:
                return str(item["lease_owner"]["S"])
    return None


def left(sdk: Any, url: str) -> int:
    counts = sdk.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(counts["ApproximateNumberOfMessages"]) + int(counts["ApproximateNumberOfMessagesNotVisible"])


def test_killing_the_push_host_of_a_mapping_loses_nothing_and_another_host_takes_over(push_stack: Stack) -> None:
    sdk = ferrymq.client("sqs", endpoint_url=push_stack.endpoint, region_name=push_stack.region,
                         aws_access_key_id=push_stack.access_key, aws_secret_access_key=push_stack.secret_key)
    api = ferrymq.client("ferrymq", endpoint_url=push_stack.endpoint, region_name=push_stack.region,
                         aws_access_key_id=push_stack.access_key, aws_secret_access_key=push_stack.secret_key)
    url = new_queue(sdk, "pushed", VisibilityTimeout="2")
    arn = sdk.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sent: list[str] = []

    def send_all() -> None:
        for start in range(0, MESSAGES, 10):
            bodies = [f"m{i}" for i in range(start, start + 10)]
            sdk.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": b}
                                                          for i, b in enumerate(bodies)])
            sent.extend(bodies)
            time.sleep(0.1)

    with receiving() as receiver:
        mapping_id = api.create_event_source_mapping(EventSourceArn=arn, Destination={"Url": receiver.url})["UUID"]
        # given a mapping delivering under load
        sender = threading.Thread(target=send_all)
        sender.start()
        try:
            wait_for(lambda: len(receiver.records()) >= 50, timeout=90)
            owner = lease_owner(push_stack, mapping_id)
            assert owner is not None
            # when the push host holding its lease is killed
            killed_at = time.monotonic()
            os.kill(int(owner.split(":")[1]), signal.SIGKILL)
            delivered_before = len(receiver.records())
        finally:
            sender.join()
        # then another host takes the mapping over and every message is delivered at least once
        new_owner = wait_for(lambda: (o := lease_owner(push_stack, mapping_id)) != owner and o, timeout=60)
        assert new_owner.split(":")[1] != owner.split(":")[1]
        wait_for(lambda: len(receiver.records()) > delivered_before, timeout=60)
        print(f"deliveries resumed {time.monotonic() - killed_at:.1f} s after the kill (lease {LEASE_SECONDS} s)")
        wait_for(lambda: {r["body"] for r in receiver.records()} >= set(sent), timeout=120)
        assert len(sent) == MESSAGES
        # and deleted once delivered
        wait_for(lambda: left(sdk, url) == 0, timeout=60)
        api.delete_event_source_mapping(UUID=mapping_id)


def test_sigterm_lets_the_push_host_finish_the_delivery_under_way(push_stack: Stack) -> None:
    keys = {"endpoint_url": push_stack.endpoint, "region_name": push_stack.region,
            "aws_access_key_id": push_stack.access_key, "aws_secret_access_key": push_stack.secret_key}
    sdk: Any = ferrymq.client("sqs", **keys)
    api: Any = ferrymq.client("ferrymq", **keys)
    # given a message whose visibility timeout outlasts the test, and a receiver that takes 3 s to answer
    url = new_queue(sdk, "pushed", VisibilityTimeout="120")
    arn = sdk.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    arrived = threading.Event()

    def slow(push: Any) -> tuple[int, bytes]:
        arrived.set()
        time.sleep(3)
        return 200, b""

    with receiving(slow) as receiver:
        mapping_id = api.create_event_source_mapping(EventSourceArn=arn, Destination={"Url": receiver.url})["UUID"]
        sdk.send_message(QueueUrl=url, MessageBody="under way")
        assert arrived.wait(60)
        # when the host delivering it is asked to stop
        owner = lease_owner(push_stack, mapping_id)
        assert owner is not None
        os.kill(int(owner.split(":")[1]), signal.SIGTERM)
        # then the delivery finishes and the message is deleted (not left in flight for its 120 s), once
        wait_for(lambda: left(sdk, url) == 0, timeout=60)
        assert [r["body"] for r in receiver.records()] == ["under way"]
        # and another host takes the mapping over
        assert wait_for(lambda: (o := lease_owner(push_stack, mapping_id)) != owner and o, timeout=60)
        api.delete_event_source_mapping(UUID=mapping_id)
