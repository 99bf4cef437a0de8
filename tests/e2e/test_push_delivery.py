"""HTTP push delivery against the session's stack: a real receiver on loopback gets Lambda's SQS event, signed;
a 2xx deletes the batch; with ReportBatchItemFailures only the listed messages stay, come back after their
visibility timeout and reach the dead-letter queue after maxReceiveCount."""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import ferrymq
from ferrymq.push.signature import MAPPING_HEADER, verify
from tests.e2e.conftest import Stack, new_queue
from tests.support.push_receiver import Push, receiving
from tests.support.waiting import wait_for


@pytest.fixture
def api(stack: Stack) -> Any:
    return ferrymq.client("ferrymq", endpoint_url=stack.endpoint, region_name=stack.region,
                          aws_access_key_id=stack.access_key, aws_secret_access_key=stack.secret_key)


def arn_of(sdk: Any, url: str) -> str:
    return str(sdk.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])


def left(sdk: Any, url: str) -> int:
    counts = sdk.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(counts["ApproximateNumberOfMessages"]) + int(counts["ApproximateNumberOfMessagesNotVisible"])


@pytest.fixture
def mapped(api: Any) -> Iterator[list[str]]:
    """UUIDs of the mappings a test made, deleted after it."""
    made: list[str] = []
    yield made
    for mapping_id in made:
        api.delete_event_source_mapping(UUID=mapping_id)


def test_a_receiver_gets_lambdas_sqs_event_signed_and_a_2xx_deletes_the_batch(
    stack: Stack, api: Any, sdk: Any, mapped: list[str]
) -> None:
    with receiving() as receiver:
        # given a queue mapped to the receiver
        url = new_queue(sdk, "pushed")
        arn = arn_of(sdk, url)
        created = api.create_event_source_mapping(EventSourceArn=arn, Destination={"Url": receiver.url})
        mapped.append(created["UUID"])
        # when messages are sent
        bodies = {f"message {i} \u00e9\U0001f680" for i in range(3)}
        for body in bodies:
            sdk.send_message(QueueUrl=url, MessageBody=body, MessageAttributes={
                "kind": {"DataType": "String", "StringValue": "demo"},
                "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"}})
        # then the receiver gets each in Lambda's record format, with the body's MD5
        got = wait_for(lambda: len(receiver.records()) >= 3 and receiver.records(), timeout=60)
        assert {r["body"] for r in got} == bodies
        for r in got:
            assert r["md5OfBody"] == hashlib.md5(r["body"].encode()).hexdigest()
            assert (r["eventSource"], r["eventSourceARN"], r["awsRegion"]) == ("aws:sqs", arn, stack.region)
            assert set(r["attributes"]) >= {"ApproximateReceiveCount", "SentTimestamp", "SenderId",
                                            "ApproximateFirstReceiveTimestamp"}
            assert r["messageAttributes"]["kind"] == {"stringValue": "demo", "binaryValue": None,
                                                      "stringListValues": [], "binaryListValues": [],
                                                      "dataType": "String"}
            assert r["messageAttributes"]["blob"]["binaryValue"] == "AAE="
            assert r["messageId"] and r["receiptHandle"]
        # each push is signed with the mapping's secret over timestamp and body
        with receiver.lock:
            pushes = list(receiver.pushes)
        for push in pushes:
            assert push.headers[MAPPING_HEADER] == created["UUID"]
            assert verify(created["SigningSecret"], push.headers, push.body, time.time())
            assert not verify(created["SigningSecret"] + "x", push.headers, push.body, time.time())
            assert not verify(created["SigningSecret"], push.headers, push.body + b" ", time.time())
        # and what was delivered is deleted
        wait_for(lambda: left(sdk, url) == 0, timeout=30)


def test_reported_failures_stay_come_back_and_reach_the_dead_letter_queue(
    api: Any, sdk: Any, mapped: list[str]
) -> None:
    # given a queue whose messages go to a dead-letter queue after 2 receives, mapped with ReportBatchItemFailures
    dlq = new_queue(sdk, "pushed-dlq")
    url = new_queue(sdk, "pushed", VisibilityTimeout="1", RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": arn_of(sdk, dlq), "maxReceiveCount": 2}))
    poison = {f"poison {i}" for i in range(10)}
    good = {f"good {i}" for i in range(90)}

    def answer(push: Push) -> tuple[int, bytes]:
        failures = [{"itemIdentifier": r["messageId"]} for r in push.records if r["body"] in poison]
        return 200, json.dumps({"batchItemFailures": failures}).encode()

    with receiving(answer) as receiver:
        mapped.append(api.create_event_source_mapping(
            EventSourceArn=arn_of(sdk, url), Destination={"Url": receiver.url},
            FunctionResponseTypes=["ReportBatchItemFailures"])["UUID"])
        # when 100 messages are sent, 10 of which the receiver always reports failed
        everything = sorted(good | poison)
        for start in range(0, 100, 10):
            sdk.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": b}
                                                          for i, b in enumerate(everything[start:start + 10])])
        # then the 90 are delivered and deleted, and the 10 reach the dead-letter queue after 2 deliveries each
        wait_for(lambda: left(sdk, url) == 0 and left(sdk, dlq) == 10, timeout=90)
        delivered = [r["body"] for r in receiver.records()]
        assert good <= set(delivered)
        assert all(delivered.count(body) == 2 for body in poison)
        in_dlq: set[str] = set()
        while len(in_dlq) < 10:
            in_dlq |= {m["Body"] for m in sdk.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10,
                                                              WaitTimeSeconds=1).get("Messages", [])}
        assert in_dlq == poison


def test_an_unknown_item_identifier_fails_the_whole_batch(api: Any, sdk: Any, mapped: list[str]) -> None:
    # given a receiver that names a message of no batch the first time it is called
    calls: list[int] = []

    def answer(push: Push) -> tuple[int, bytes]:
        calls.append(1)
        if len(calls) == 1:
            return 200, json.dumps({"batchItemFailures": [{"itemIdentifier": "not-a-message-id"}]}).encode()
        return 200, b"{}"

    url = new_queue(sdk, "pushed", VisibilityTimeout="1")
    with receiving(answer) as receiver:
        mapped.append(api.create_event_source_mapping(
            EventSourceArn=arn_of(sdk, url), Destination={"Url": receiver.url},
            FunctionResponseTypes=["ReportBatchItemFailures"])["UUID"])
        sdk.send_message(QueueUrl=url, MessageBody="again")
        # then the message is delivered again (nothing of the batch was deleted), and deleted after that success
        wait_for(lambda: len(receiver.records()) >= 2 and left(sdk, url) == 0, timeout=60)
        assert [r["body"] for r in receiver.records()] == ["again", "again"]
        assert receiver.records()[1]["attributes"]["ApproximateReceiveCount"] == "2"
        state = api.get_event_source_mapping(UUID=mapped[0])
        assert state["LastProcessingResult"] == "OK"


def test_a_failing_receiver_keeps_messages_until_it_recovers(api: Any, sdk: Any, mapped: list[str]) -> None:
    # given a receiver answering 500 until told otherwise
    status = {"code": 500}
    url = new_queue(sdk, "pushed", VisibilityTimeout="1")
    with receiving(lambda push: (status["code"], b"")) as receiver:
        mapped.append(api.create_event_source_mapping(EventSourceArn=arn_of(sdk, url),
                                                      Destination={"Url": receiver.url})["UUID"])
        sdk.send_message(QueueUrl=url, MessageBody="kept")
        # then nothing is deleted while it fails, and the mapping says why
        wait_for(lambda: len(receiver.pushes) >= 2, timeout=60)
        assert left(sdk, url) == 1
        wait_for(lambda: "HTTP 500" in api.get_event_source_mapping(UUID=mapped[0])["LastProcessingResult"])
        # when it recovers, the message is delivered and deleted
        status["code"] = 204
        wait_for(lambda: left(sdk, url) == 0, timeout=90)
        assert {r["body"] for r in receiver.records()} == {"kept"}


def test_a_disabled_mapping_delivers_nothing_until_enabled(api: Any, sdk: Any, mapped: list[str]) -> None:
    url = new_queue(sdk, "pushed")
    with receiving() as receiver:
        mapped.append(api.create_event_source_mapping(EventSourceArn=arn_of(sdk, url), Enabled=False,
                                                      Destination={"Url": receiver.url})["UUID"])
        sdk.send_message(QueueUrl=url, MessageBody="waits")
        # the message stays receivable by anyone while the mapping is disabled
        seen = wait_for(lambda: sdk.receive_message(QueueUrl=url, VisibilityTimeout=0).get("Messages"))
        assert seen[0]["Body"] == "waits" and receiver.pushes == []
        api.update_event_source_mapping(UUID=mapped[0], Enabled=True)
        wait_for(lambda: left(sdk, url) == 0, timeout=60)
        assert [r["body"] for r in receiver.records()] == ["waits"]




def test_a_fifo_queue_keeps_each_groups_order_under_partial_failures(api: Any, sdk: Any, mapped: list[str]) -> None:
    # given a FIFO queue mapped with ReportBatchItemFailures, and a receiver that reports "a 1" failed once
    url = new_queue(sdk, "pushed", fifo=True, VisibilityTimeout="1", ContentBasedDeduplication="true")
    failed_once: set[str] = set()
    accepted: dict[str, list[int]] = {"a": [], "b": []}

    def answer(push: Push) -> tuple[int, bytes]:
        failures: list[dict[str, str]] = []
        stopped: set[str] = set()
        for r in push.records:
            group, index = r["body"].split()
            if group in stopped:
                continue
            if r["body"] == "a 1" and r["body"] not in failed_once:
                failed_once.add(r["body"])
                stopped.add(group)
                failures.append({"itemIdentifier": r["messageId"]})
                continue
            accepted[group].append(int(index))
        return 200, json.dumps({"batchItemFailures": failures}).encode()

    with receiving(answer) as receiver:
        mapped.append(api.create_event_source_mapping(
            EventSourceArn=arn_of(sdk, url), Destination={"Url": receiver.url}, BatchSize=10,
            FunctionResponseTypes=["ReportBatchItemFailures"])["UUID"])
        # when two groups' messages are sent interleaved
        sdk.send_message_batch(QueueUrl=url, Entries=[
            {"Id": f"{g}{i}", "MessageBody": f"{g} {i}", "MessageGroupId": g} for i in range(4) for g in "ab"])
        # then each group is taken in order: "a" from its failure on is delivered again, in order
        wait_for(lambda: left(sdk, url) == 0, timeout=60)
        assert accepted == {"a": [0, 1, 2, 3], "b": [0, 1, 2, 3]}
        assert [r["body"] for r in receiver.records()].count("a 1") == 2
        for push in receiver.pushes:
            for group in "ab":
                order = [int(r["body"].split()[1]) for r in push.records if r["body"].startswith(group)]
                assert order == sorted(order)


def test_the_batching_window_holds_a_small_batch_until_the_window_or_the_batch_size(
    api: Any, sdk: Any, mapped: list[str]
) -> None:
    url = new_queue(sdk, "pushed")
    with receiving() as receiver:
        # given a mapping that gathers up to 20 records for up to 3 s
        mapped.append(api.create_event_source_mapping(EventSourceArn=arn_of(sdk, url), BatchSize=20,
                                                      MaximumBatchingWindowInSeconds=3,
                                                      Destination={"Url": receiver.url})["UUID"])
        # when messages trickle in, one every 0.3 s
        for i in range(4):
            sdk.send_message(QueueUrl=url, MessageBody=f"trickle {i}")
            time.sleep(0.3)
        # then they arrive together, in one push, once the window has passed
        wait_for(lambda: len(receiver.records()) >= 4, timeout=60)
        assert [sorted(r["body"] for r in p.records) for p in receiver.pushes] == [[f"trickle {i}" for i in range(4)]]
    full = new_queue(sdk, "pushed")
    with receiving() as receiver:
        # and with a window of 300 s, a full batch goes at once
        mapped.append(api.create_event_source_mapping(EventSourceArn=arn_of(sdk, full), BatchSize=20,
                                                      MaximumBatchingWindowInSeconds=300,
                                                      Destination={"Url": receiver.url})["UUID"])
        for start in range(0, 20, 10):
            sdk.send_message_batch(QueueUrl=full, Entries=[{"Id": str(i), "MessageBody": f"full {start + i}"}
                                                           for i in range(10)])
        wait_for(lambda: len(receiver.records()) >= 20, timeout=60)
        assert [len(p.records) for p in receiver.pushes] == [20]


def test_concurrency_ramps_up_to_maximum_concurrency_and_no_further_while_the_receiver_is_slow(
    api: Any, sdk: Any, mapped: list[str]
) -> None:
    # given a receiver that takes 0.5 s per push and counts the pushes it is handling at once
    lock = threading.Lock()
    now = {"in": 0, "most": 0}

    def slow(push: Push) -> tuple[int, bytes]:
        with lock:
            now["in"] += 1
            now["most"] = max(now["most"], now["in"])
        time.sleep(0.5)
        with lock:
            now["in"] -= 1
        return 200, b""

    url = new_queue(sdk, "pushed")
    for start in range(0, 40, 10):
        sdk.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"slow {start + i}"}
                                                      for i in range(10)])
    with receiving(slow) as receiver:
        # when a mapping of batches of one, at most three at once, delivers a backlog
        mapped.append(api.create_event_source_mapping(EventSourceArn=arn_of(sdk, url), BatchSize=1,
                                                      ScalingConfig={"MaximumConcurrency": 3},
                                                      Destination={"Url": receiver.url})["UUID"])
        wait_for(lambda: left(sdk, url) == 0, timeout=90)
        # then it ramped up to three batches at once, and never past them
        assert now["most"] == 3
        assert len({r["body"] for r in receiver.records()}) == 40


def test_the_host_delivering_a_mapping_exports_its_series(stack: Stack, api: Any, sdk: Any,
                                                          mapped: list[str]) -> None:
    url = new_queue(sdk, "pushed")
    with receiving() as receiver:
        mapping_id = api.create_event_source_mapping(EventSourceArn=arn_of(sdk, url),
                                                     Destination={"Url": receiver.url})["UUID"]
        mapped.append(mapping_id)
        sdk.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"counted {i}"}
                                                      for i in range(5)])
        wait_for(lambda: len(receiver.records()) >= 5 and left(sdk, url) == 0, timeout=60)
        # the host holding the mapping's lease names its metrics in its heartbeat item
        dynamodb = stack.aws_client("dynamodb")
        table = f"{stack.env.get('FERRYMQ_TABLE_PREFIX', 'ferrymq-')}event-source-mappings"
        items = [i for p in dynamodb.get_paginator("scan").paginate(TableName=table) for i in p["Items"]]
        owner = next(i["lease_owner"]["S"] for i in items if i["id"]["S"] == f"m#{mapping_id}")
        metrics_url = next(i["metrics_url"]["S"] for i in items if i["id"]["S"] == owner)
        with urllib.request.urlopen(metrics_url, timeout=10) as answer:
            text = answer.read().decode()
        series = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                  if f'mapping="{mapping_id}"' in line}
        label = f'mapping="{mapping_id}"'
        assert series[f'ferrymq_push_records_total{{{label},outcome="delivered"}}'] == 5
        assert series[f'ferrymq_push_batches_total{{{label},outcome="delivered"}}'] >= 1
        assert series[f"ferrymq_push_invoke_seconds_count{{{label}}}"] >= 1
        assert f"ferrymq_push_concurrency{{{label}}}" in series
        assert series[f"ferrymq_push_oldest_message_age_seconds{{{label}}}"] >= 0


@pytest.mark.parametrize(("status", "answer"), [
    (302, b""),                                                   # a redirect is not followed: not delivered
    (200, b"<html>ok</html>"),                                    # not JSON, under ReportBatchItemFailures
    (200, b'{"batchItemFailures": [{"itemIdentifier": ""}]}'),    # an empty identifier
    (200, b"[" * 100_000 + b"]" * 100_000),                       # nested past any parser's depth
    (200, b'{"batchItemFailures": []}' + b" " * (2 << 20)),       # past the 1 MiB read of an answer
])
def test_hostile_answers_keep_the_batch(api: Any, sdk: Any, mapped: list[str], status: int,
                                        answer: bytes) -> None:
    url = new_queue(sdk, "pushed", VisibilityTimeout="1")
    calls: list[int] = []

    def reply(push: Push) -> tuple[int, bytes]:
        calls.append(1)
        return (status, answer) if len(calls) == 1 else (200, b"")

    with receiving(reply) as receiver:
        mapped.append(api.create_event_source_mapping(
            EventSourceArn=arn_of(sdk, url), Destination={"Url": receiver.url + "?redirect=1"},
            FunctionResponseTypes=["ReportBatchItemFailures"])["UUID"])
        sdk.send_message(QueueUrl=url, MessageBody="kept once")
        # the first answer keeps the message, which is delivered again and then deleted
        wait_for(lambda: len(receiver.records()) >= 2 and left(sdk, url) == 0, timeout=60)
        assert [r["body"] for r in receiver.records()] == ["kept once", "kept once"]


def test_the_push_hosts_share_the_mappings(stack: Stack, api: Any, sdk: Any, mapped: list[str]) -> None:
    # given four mappings and the two push hosts up runs
    arn = arn_of(sdk, new_queue(sdk, "pushed"))
    for i in range(4):
        mapped.append(api.create_event_source_mapping(EventSourceArn=arn,
                                                      Destination={"Url": f"http://127.0.0.1:9/{i}"})["UUID"])
    dynamodb = stack.aws_client("dynamodb")
    table = f"{stack.env.get('FERRYMQ_TABLE_PREFIX', 'ferrymq-')}event-source-mappings"

    def owners() -> dict[str, str] | None:
        items = [i for p in dynamodb.get_paginator("scan").paginate(TableName=table) for i in p["Items"]]
        held = {i["uuid"]["S"]: i.get("lease_owner", {}).get("S") for i in items if i["id"]["S"].startswith("m#")}
        found = {m: held.get(m) for m in mapped}
        return found if all(found.values()) else None  # type: ignore[return-value]

    # then each host takes at most its fair share (half, and one more), so both deliver
    held = wait_for(owners, timeout=60)
    per_host = [list(held.values()).count(owner) for owner in set(held.values())]
    assert len(per_host) == 2 and max(per_host) <= 3


def test_a_batch_past_lambdas_payload_limit_goes_in_several_pushes(api: Any, sdk: Any, mapped: list[str]) -> None:
    # given eight messages of 900 kB each (7.2 MB: past the 6 MB of one invocation)
    url = new_queue(sdk, "pushed")
    bodies = {f"{i}" + "x" * 900_000 for i in range(8)}
    for body in bodies:
        sdk.send_message(QueueUrl=url, MessageBody=body)
    with receiving() as receiver:
        mapped.append(api.create_event_source_mapping(EventSourceArn=arn_of(sdk, url),
                                                      Destination={"Url": receiver.url})["UUID"])
        # then they arrive in pushes of at most 6 MB, each message once
        wait_for(lambda: left(sdk, url) == 0, timeout=60)
        assert sorted(r["body"] for r in receiver.records()) == sorted(bodies)
        assert len(receiver.pushes) >= 2
        assert all(len(p.body) <= 6 * 1024 * 1024 for p in receiver.pushes)


def test_a_rotated_secret_is_shown_once_and_signs_the_pushes_after_it(api: Any, sdk: Any, mapped: list[str]) -> None:
    url = new_queue(sdk, "pushed")
    with receiving() as receiver:
        created = api.create_event_source_mapping(EventSourceArn=arn_of(sdk, url), Destination={"Url": receiver.url})
        mapped.append(created["UUID"])
        # when the secret is rotated
        rotated = api.rotate_event_source_mapping_secret(UUID=created["UUID"])
        assert rotated["SigningSecret"] != created["SigningSecret"] and rotated["SigningSecret"].startswith("fmqs_")
        assert "SigningSecret" not in api.get_event_source_mapping(UUID=created["UUID"])

        # then pushes are signed with the new secret once the poller has restarted, and never with a third one
        def signed_with_new() -> bool:
            sdk.send_message(QueueUrl=url, MessageBody="signed")
            time.sleep(0.5)
            with receiver.lock:
                pushes = list(receiver.pushes)
            assert all(verify(created["SigningSecret"], p.headers, p.body, time.time())
                       or verify(rotated["SigningSecret"], p.headers, p.body, time.time()) for p in pushes)
            return any(verify(rotated["SigningSecret"], p.headers, p.body, time.time()) for p in pushes)

        wait_for(signed_with_new, timeout=60)


def test_only_http_mappings_have_a_secret_to_rotate(api: Any, sdk: Any, mapped: list[str]) -> None:
    arn = arn_of(sdk, new_queue(sdk, "pushed"))
    mapped.append(api.create_event_source_mapping(EventSourceArn=arn, FunctionName="f")["UUID"])
    with pytest.raises(api.exceptions.InvalidParameterValueException):
        api.rotate_event_source_mapping_secret(UUID=mapped[0])
    with pytest.raises(api.exceptions.ResourceNotFound):
        api.rotate_event_source_mapping_secret(UUID=str(uuid.uuid4()))
