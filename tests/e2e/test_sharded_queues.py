"""Queues spread over several partitions (``FerryMQShardCount``), on two storage clusters of two partitions each,
through the front end with real SDK clients on both protocols.

Receipt handles of a sharded queue name their shard (``s<index>.``), which is how these tests see where a
message was stored without looking inside the workers.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.e2e.conftest import Stack
from tests.support.sqs_clients import sqs_client
from tests.support.stack import started

SHARDED_ENV = {
    "FERRYMQ_CLUSTERS": "2",
    "FERRYMQ_WORKERS": "1",
    "FERRYMQ_REPLICATION_FACTOR": "1",
    "FERRYMQ_PARTITIONS": "2",
}


@pytest.fixture(scope="module")
def sharded_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from started(Path(tmp_path_factory.mktemp("sharded")), SHARDED_ENV)


@pytest.fixture(params=["json", "query"])
def client(sharded_stack: Stack, request: pytest.FixtureRequest) -> Any:
    return sqs_client(sharded_stack.endpoint, request.param, access_key=sharded_stack.access_key,
                      secret_key=sharded_stack.secret_key, region=sharded_stack.region)


def new_queue(sqs: Any, shards: int, **attributes: str) -> str:
    name = f"sharded-{uuid.uuid4().hex[:8]}" + (".fifo" if attributes.get("FifoQueue") == "true" else "")
    return sqs.create_queue(QueueName=name, Attributes={"FerryMQShardCount": str(shards), **attributes})["QueueUrl"]


def shard_of(handle: str) -> int:
    prefix, dot, _ = handle.partition(".")
    assert dot and prefix.startswith("s"), handle
    return int(prefix[1:])


def drain(sqs: Any, url: str, *, delete: bool = True) -> list[dict[str, Any]]:
    """Receive until a long poll comes back empty; every message received, deleted unless told not to."""
    got: list[dict[str, Any]] = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []):
        got += batch
        if delete:
            result = sqs.delete_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)]
            )
            assert len(result["Successful"]) == len(batch), result.get("Failed")
    return got


def counts(sqs: Any, url: str) -> tuple[int, int]:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])


def test_sends_spread_over_every_shard_and_receives_gather_each_message_once(client: Any) -> None:
    url = new_queue(client, 4)
    assert client.get_queue_attributes(QueueUrl=url, AttributeNames=["FerryMQShardCount"])["Attributes"] == {
        "FerryMQShardCount": "4"
    }
    assert client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]["FerryMQShardCount"] == "4"
    # each request goes to one shard drawn at random: 62 requests leave a shard without any with a chance of
    # 4 * (3/4)^62, under one in ten million
    bodies = [f"m{i}" for i in range(80)]
    for body in bodies[:60]:
        client.send_message(QueueUrl=url, MessageBody=body)
    for start in range(60, 80, 10):
        entries = [{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies[start:start + 10])]
        assert len(client.send_message_batch(QueueUrl=url, Entries=entries)["Successful"]) == 10
    # the counts are the sum over the shards
    assert counts(client, url) == (80, 0)
    got = drain(client, url)
    assert sorted(m["Body"] for m in got) == sorted(bodies)
    # every shard took a share, and each message came out exactly once
    assert {shard_of(m["ReceiptHandle"]) for m in got} == {0, 1, 2, 3}
    assert counts(client, url) == (0, 0)


def test_a_queue_that_never_set_a_shard_count_answers_as_sqs_does(client: Any) -> None:
    url = client.create_queue(QueueName=f"plain-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    assert "FerryMQShardCount" not in client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert client.get_queue_attributes(QueueUrl=url, AttributeNames=["FerryMQShardCount"])["Attributes"] == {
        "FerryMQShardCount": "1"
    }
    client.send_message(QueueUrl=url, MessageBody="plain")
    (message,) = client.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert "." not in message["ReceiptHandle"]
    client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def test_a_long_poll_wakes_for_a_message_on_any_shard(client: Any, sharded_stack: Stack) -> None:
    url = new_queue(client, 4)
    received: list[Any] = []
    poller = threading.Thread(
        target=lambda: received.append(client.receive_message(QueueUrl=url, WaitTimeSeconds=15).get("Messages"))
    )
    poller.start()
    time.sleep(1.5)
    sender = sqs_client(sharded_stack.endpoint, "json", access_key=sharded_stack.access_key,
                        secret_key=sharded_stack.secret_key, region=sharded_stack.region)
    for i in range(4):  # a random shard each: whichever one it is, the waiting receive gets it
        sender.send_message(QueueUrl=url, MessageBody=f"wake-{i}")
    poller.join(20)
    assert received and received[0], "the long poll returned nothing"
    assert received[0][0]["Body"].startswith("wake-")


def test_visibility_changes_and_deletes_find_their_shard_and_a_bad_prefix_is_refused(client: Any) -> None:
    url = new_queue(client, 3)
    for i in range(12):
        client.send_message(QueueUrl=url, MessageBody=f"v{i}")
    first = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300)["Messages"]
    # back to visible at once, by handles of several shards in one batch
    result = client.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0} for i, m in enumerate(first)
    ])
    assert len(result["Successful"]) == len(first)
    again = drain(client, url)
    assert sorted(m["Body"] for m in again) == sorted(f"v{i}" for i in range(12))
    # a handle whose prefix names no shard of the queue
    bad = "s7." + first[0]["ReceiptHandle"].partition(".")[2]
    with pytest.raises(ClientError) as refused:
        client.delete_message(QueueUrl=url, ReceiptHandle=bad)
    assert refused.value.response["Error"]["Code"] == "ReceiptHandleIsInvalid"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    batch = client.delete_message_batch(QueueUrl=url, Entries=[{"Id": "bad", "ReceiptHandle": bad}])
    assert [f["Code"] for f in batch["Failed"]] == ["ReceiptHandleIsInvalid"]
    with pytest.raises(ClientError) as changed:
        client.change_message_visibility(QueueUrl=url, ReceiptHandle="sx." + bad[3:], VisibilityTimeout=5)
    assert changed.value.response["Error"]["Code"] == "ReceiptHandleIsInvalid"


def test_purge_empties_every_shard(client: Any) -> None:
    url = new_queue(client, 4)
    client.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "p"} for i in range(10)])
    for _ in range(3):
        client.send_message(QueueUrl=url, MessageBody="p")
    assert counts(client, url) == (13, 0)
    client.purge_queue(QueueUrl=url)
    assert counts(client, url) == (0, 0)
    assert client.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", []) == []


def test_a_queue_grows_but_never_shrinks_and_handles_from_before_stay_valid(client: Any) -> None:
    url = new_queue(client, 1)
    for i in range(6):
        client.send_message(QueueUrl=url, MessageBody=f"g{i}")
    held = client.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=300)["Messages"]
    client.set_queue_attributes(QueueUrl=url, Attributes={"FerryMQShardCount": "3"})
    assert client.get_queue_attributes(QueueUrl=url, AttributeNames=["FerryMQShardCount"])["Attributes"] == {
        "FerryMQShardCount": "3"
    }
    # the handles issued before it grew still delete
    for message in held:
        client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    for i in range(6, 12):
        client.send_message(QueueUrl=url, MessageBody=f"g{i}")
    rest = drain(client, url)
    assert sorted(m["Body"] for m in rest + held) == sorted(f"g{i}" for i in range(12))
    # a shrink would strand messages; out of range is refused as any bad value is
    for value in ("2", "0", "65", "many"):
        with pytest.raises(ClientError) as refused:
            client.set_queue_attributes(QueueUrl=url, Attributes={"FerryMQShardCount": value})
        assert refused.value.response["Error"]["Code"] == "InvalidAttributeValue", value
    assert client.get_queue_attributes(QueueUrl=url, AttributeNames=["FerryMQShardCount"])["Attributes"] == {
        "FerryMQShardCount": "3"
    }


def test_a_sharded_fifo_queue_keeps_each_groups_order_and_deduplicates(client: Any) -> None:
    url = new_queue(client, 4, FifoQueue="true", FifoThroughputLimit="perMessageGroupId",
                    DeduplicationScope="messageGroup")
    groups = [f"group-{g}" for g in range(8)]
    for i in range(5):
        entries = [
            {"Id": str(k), "MessageBody": f"{group}:{i}", "MessageGroupId": group,
             "MessageDeduplicationId": f"{group}-{i}"}
            for k, group in enumerate(groups)
        ]
        assert len(client.send_message_batch(QueueUrl=url, Entries=entries)["Successful"]) == len(groups)
    # a resend within the deduplication window stores nothing
    client.send_message(QueueUrl=url, MessageBody="group-0:0", MessageGroupId="group-0",
                        MessageDeduplicationId="group-0-0")
    got = drain(client, url)
    by_group: dict[str, list[int]] = {}
    for m in got:
        group, index = m["Body"].split(":")
        by_group.setdefault(group, []).append(int(index))
    assert by_group == {group: [0, 1, 2, 3, 4] for group in groups}
    # the groups were spread over the shards
    assert len({shard_of(m["ReceiptHandle"]) for m in got}) > 1


def test_deleting_a_sharded_queue_gives_back_the_room_of_every_shard(client: Any, sharded_stack: Stack) -> None:
    def placed() -> int:
        report = json.loads(sharded_stack.ferrymq("cluster", "status", "--json"))
        return sum(c["queues"] for c in report["clusters"])

    before = placed()
    url = new_queue(client, 4)
    client.send_message(QueueUrl=url, MessageBody="doomed")
    assert placed() == before + 4
    client.delete_queue(QueueUrl=url)
    assert placed() == before


def test_a_move_task_redrives_every_shard_of_a_sharded_dead_letter_queue(client: Any) -> None:
    dlq = new_queue(client, 3)
    dlq_arn = client.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    source = client.create_queue(
        QueueName=f"source-{uuid.uuid4().hex[:8]}",
        Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "1"})},
    )["QueueUrl"]
    source_arn = client.get_queue_attributes(QueueUrl=source, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for i in range(15):  # straight into the dead-letter queue (so they name no source): a random shard each
        client.send_message(QueueUrl=dlq, MessageBody=f"dead-{i}")
    client.start_message_move_task(SourceArn=dlq_arn, DestinationArn=source_arn)
    deadline = time.monotonic() + 30
    while True:
        (task,) = client.list_message_move_tasks(SourceArn=dlq_arn, MaxResults=1)["Results"]
        if task["Status"] != "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert task["Status"] == "COMPLETED", task
    assert task["ApproximateNumberOfMessagesMoved"] == 15
    assert Counter(m["Body"] for m in drain(client, source)) == Counter(f"dead-{i}" for i in range(15))
    assert counts(client, dlq) == (0, 0)


def test_more_shards_than_partitions_keep_their_messages_apart(client: Any) -> None:
    # six shards on the stack's four partitions: some partitions hold two shards of the queue
    url = new_queue(client, 6)
    client.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"x{i}"} for i in range(10)])
    for i in range(10, 30):
        client.send_message(QueueUrl=url, MessageBody=f"x{i}")
    assert counts(client, url) == (30, 0)
    got = drain(client, url)
    assert sorted(m["Body"] for m in got) == sorted(f"x{i}" for i in range(30))
    assert len(got) == 30
