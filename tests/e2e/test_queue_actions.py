"""Queue management actions through real boto3 clients, on both wire protocols."""

from __future__ import annotations

import uuid
from typing import Any

from ferrymq.storage.engine.messages import STEP
from tests.support.errors import expect_error


def _name(prefix: str = "q") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def test_create_get_list_delete(sqs: Any) -> None:
    # given a new queue
    name = _name("life")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    assert url.endswith(f"/000000000000/{name}")
    # then it can be found by name and in a prefix listing
    assert sqs.get_queue_url(QueueName=name)["QueueUrl"] == url
    assert url in sqs.list_queues(QueueNamePrefix=name)["QueueUrls"]
    # when deleted, then it is gone
    sqs.delete_queue(QueueUrl=url)
    expect_error(lambda: sqs.get_queue_url(QueueName=name), "AWS.SimpleQueueService.NonExistentQueue", 400,
                 json_code="QueueDoesNotExist")
    assert "QueueUrls" not in sqs.list_queues(QueueNamePrefix=name)


def test_create_twice_same_attributes_returns_same_url_and_different_fails(sqs: Any) -> None:
    name = _name("twice")
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"]
    assert sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "45"})["QueueUrl"] == url
    expect_error(lambda: sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "46"}),
                 "QueueAlreadyExists", 400, json_code="QueueNameExists")


def test_create_rejects_bad_names_and_attributes(sqs: Any) -> None:
    expect_error(lambda: sqs.create_queue(QueueName="bad name!"), "InvalidParameterValue", 400,
                 message="Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
    expect_error(lambda: sqs.create_queue(QueueName="x" * 81), "InvalidParameterValue", 400)
    expect_error(lambda: sqs.create_queue(QueueName=_name(), Attributes={"VisibilityTimeout": "43201"}),
                 "InvalidAttributeValue", 400, message="Invalid value for the parameter VisibilityTimeout.")
    expect_error(lambda: sqs.create_queue(QueueName=_name(), Attributes={"MessageRetentionPeriod": "59"}),
                 "InvalidAttributeValue", 400)


def test_recreate_within_60_seconds_is_refused(sqs: Any) -> None:
    name = _name("recent")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.delete_queue(QueueUrl=url)
    expect_error(lambda: sqs.create_queue(QueueName=name), "AWS.SimpleQueueService.QueueDeletedRecently", 400,
                 json_code="QueueDeletedRecently")


def test_list_queues_pages_with_max_results(sqs: Any) -> None:
    prefix = _name("page")
    urls = sorted(sqs.create_queue(QueueName=f"{prefix}-{i}")["QueueUrl"] for i in range(5))
    seen: list[str] = []
    kwargs: dict[str, Any] = {"QueueNamePrefix": prefix, "MaxResults": 2}
    while True:
        page = sqs.list_queues(**kwargs)
        assert len(page.get("QueueUrls", [])) <= 2
        seen.extend(page.get("QueueUrls", []))
        if "NextToken" not in page:
            break
        kwargs["NextToken"] = page["NextToken"]
    assert sorted(seen) == urls
    expect_error(lambda: sqs.list_queues(MaxResults=1001), "InvalidParameterValue", 400)


def test_attributes_defaults_set_and_get(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("attrs"), Attributes={"DelaySeconds": "3"})["QueueUrl"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["DelaySeconds"] == "3"
    assert attrs["VisibilityTimeout"] == "30"
    assert attrs["MessageRetentionPeriod"] == "345600"
    assert attrs["MaximumMessageSize"] == "1048576"
    assert attrs["ReceiveMessageWaitTimeSeconds"] == "0"
    assert attrs["ApproximateNumberOfMessages"] == "0"
    assert attrs["QueueArn"].startswith("arn:aws:sqs:us-east-1:000000000000:attrs-")
    assert int(attrs["CreatedTimestamp"]) > 1_600_000_000
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "120", "DelaySeconds": "0"})
    picked = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout", "DelaySeconds"])
    assert picked["Attributes"] == {"VisibilityTimeout": "120", "DelaySeconds": "0"}
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url)
    expect_error(lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "901"}),
                 "InvalidAttributeValue", 400)
    expect_error(lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"QueueArn": "x"}),
                 "InvalidAttributeName", 400)
    expect_error(lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Nope"]),
                 "InvalidAttributeName", 400)


def test_approximate_counts_follow_messages(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("counts"))["QueueUrl"]
    for i in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=600)
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)
    counted = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    assert counted == {
        "ApproximateNumberOfMessages": "2",
        "ApproximateNumberOfMessagesNotVisible": "1",
        "ApproximateNumberOfMessagesDelayed": "1",
    }


def test_purge_removes_messages_and_is_limited_to_once_a_minute(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("purge"))["QueueUrl"]
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(5)])
    sqs.purge_queue(QueueUrl=url)
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    expect_error(lambda: sqs.purge_queue(QueueUrl=url), "AWS.SimpleQueueService.PurgeQueueInProgress", 403,
                 json_code="PurgeQueueInProgress")


def test_a_purge_of_more_messages_than_a_worker_frees_at_once_empties_the_queue_and_it_takes_new_ones(
    sqs: Any,
) -> None:
    # given a queue holding more messages than a worker frees in one step, some of them in flight
    url = sqs.create_queue(QueueName=_name("purge-big"))["QueueUrl"]
    for start in range(0, STEP + 200, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"old-{start + i}"}
                                                     for i in range(10)])
    held = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)["Messages"]
    # when it is purged
    sqs.purge_queue(QueueUrl=url)
    # then it counts nothing at once, and a receive finds nothing
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert [counts[f"ApproximateNumberOfMessages{kind}"] for kind in ("", "NotVisible", "Delayed")] == ["0"] * 3
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    # and a message sent after is the only one it holds, whatever a handle from before the purge deletes
    sqs.send_message(QueueUrl=url, MessageBody="new")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=held[0]["ReceiptHandle"])
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in got] == ["new"]


def test_actions_on_missing_queues_fail(sqs: Any, stack: Any) -> None:
    missing = f"{stack.endpoint}/000000000000/{_name('missing')}"
    for call in (
        lambda: sqs.send_message(QueueUrl=missing, MessageBody="x"),
        lambda: sqs.receive_message(QueueUrl=missing),
        lambda: sqs.delete_queue(QueueUrl=missing),
        lambda: sqs.get_queue_attributes(QueueUrl=missing, AttributeNames=["All"]),
        lambda: sqs.purge_queue(QueueUrl=missing),
    ):
        expect_error(call, "AWS.SimpleQueueService.NonExistentQueue", 400, json_code="QueueDoesNotExist")
