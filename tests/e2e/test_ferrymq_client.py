"""``ferrymq.client("ferrymq")`` against the session's stack: FerryMQ's own API with botocore's SigV4, paginators,
waiters and modeled errors; admin actions refused to other keys; a peek that changes nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import ferrymq
from tests.e2e.conftest import Stack, new_queue


def api_client(stack: Stack, key_id: str | None = None, secret: str | None = None) -> Any:
    return ferrymq.client("ferrymq", endpoint_url=stack.endpoint, region_name=stack.region,
                          aws_access_key_id=key_id or stack.access_key,
                          aws_secret_access_key=secret or stack.secret_key)


@pytest.fixture
def api(stack: Stack) -> Any:
    """The client signing with the development key, which `ferrymq up` makes an admin key."""
    return api_client(stack)


@pytest.fixture
def outsider(stack: Stack) -> Iterator[tuple[str, str, str]]:
    """(account, key id, secret) of a plain key of an account of its own."""
    account = f"8{uuid.uuid4().int % 10**11:011d}"
    key_id, secret = stack.create_credentials(account, "outsider")
    yield account, key_id, secret


def test_a_key_that_is_not_an_admin_key_is_refused_admin_actions(stack: Stack, api: Any, outsider: tuple) -> None:
    _, key_id, secret = outsider
    plain = api_client(stack, key_id, secret)
    for call in (plain.get_cluster_status, plain.list_access_keys, plain.list_accounts, plain.get_usage_summary):
        with pytest.raises(plain.exceptions.AccessDenied) as refused:
            call()
        error = refused.value.response
        assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == ("AccessDenied", 403)
    with pytest.raises(plain.exceptions.AccessDenied):
        plain.create_access_key(AccountId="111122223333", UserName="intruder", Admin=True)
    # while the admin key may do them
    assert api.get_cluster_status()["Cluster"] == "local"


def test_queue_calls_follow_queue_authorisation_and_admin_keys_see_every_account(
    stack: Stack, api: Any, sdk: Any, outsider: tuple
) -> None:
    account, key_id, secret = outsider
    plain = api_client(stack, key_id, secret)
    own_sqs = ferrymq.client("sqs", endpoint_url=stack.endpoint, region_name=stack.region, aws_access_key_id=key_id,
                             aws_secret_access_key=secret)
    own = new_queue(own_sqs, "outsiders")
    own_sqs.send_message(QueueUrl=own, MessageBody="mine")
    # the owner may look at its own queue
    assert plain.get_queue_statistics(QueueUrl=own)["Visible"] == 1
    assert [m["Body"] for m in plain.peek_messages(QueueUrl=own)["Messages"]] == ["mine"]
    # not at another account's
    theirs = new_queue(sdk, "not-outsiders")
    with pytest.raises(plain.exceptions.AccessDenied):
        plain.peek_messages(QueueUrl=theirs)
    # an admin key may look at any account's queue
    assert f"/{account}/" in own and api.get_queue_statistics(QueueUrl=own)["Visible"] == 1
    # and a queue that does not exist is the modeled QueueDoesNotExist
    with pytest.raises(api.exceptions.QueueDoesNotExist):
        api.get_queue_statistics(QueueUrl=theirs + "-gone")


def test_a_peek_leaves_messages_visible_and_their_receive_counts_unchanged(api: Any, sdk: Any) -> None:
    # given an encrypted queue whose message was received once and is visible again
    url = new_queue(sdk, "peeked", SqsManagedSseEnabled="true")
    sdk.send_message(QueueUrl=url, MessageBody="look, don't touch",
                     MessageAttributes={"kind": {"DataType": "String", "StringValue": "demo"}})
    first = sdk.receive_message(QueueUrl=url, VisibilityTimeout=0, AttributeNames=["All"])["Messages"][0]
    assert first["Attributes"]["ApproximateReceiveCount"] == "1"
    before = api.get_queue_statistics(QueueUrl=url)
    # when it is peeked at twice
    for _ in range(2):
        peeked = api.peek_messages(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        # then it shows decrypted, with its attributes, its receive count and no receipt handle
        assert [(m["MessageId"], m["Body"], m["ReceiveCount"]) for m in peeked] == [
            (first["MessageId"], "look, don't touch", 1)]
        assert peeked[0]["MessageAttributes"]["kind"]["StringValue"] == "demo"
        assert "ReceiptHandle" not in peeked[0]
    # and the queue's counts are as they were, and the next receive is the message's second
    after = api.get_queue_statistics(QueueUrl=url)
    assert (after["Visible"], after["InFlight"]) == (before["Visible"], before["InFlight"]) == (1, 0)
    again = sdk.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"][0]
    assert (again["MessageId"], again["Attributes"]["ApproximateReceiveCount"]) == (first["MessageId"], "2")


def test_the_key_listing_pages_with_botocore_s_paginator(stack: Stack, api: Any) -> None:
    account = f"7{uuid.uuid4().int % 10**11:011d}"
    made = {api.create_access_key(AccountId=account, UserName=f"user{i}")["AccessKey"]["AccessKeyId"]
            for i in range(3)}
    pages = list(api.get_paginator("list_access_keys").paginate(AccountId=account,
                                                                PaginationConfig={"PageSize": 2}))
    assert [len(p["AccessKeys"]) for p in pages] == [2, 1]
    listed = [k["AccessKeyId"] for p in pages for k in p["AccessKeys"]]
    assert sorted(listed) == sorted(made) and len(set(listed)) == 3
    assert all("SecretAccessKey" not in k for p in pages for k in p["AccessKeys"])
    with pytest.raises(api.exceptions.InvalidParameterValue):
        api.list_access_keys(NextToken="not-a-token")


def test_cluster_status_names_workers_partitions_leaders_and_lag(api: Any) -> None:
    api.get_waiter("cluster_healthy").wait(WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    status = api.get_cluster_status()
    workers = {w["WorkerId"]: w for w in status["Workers"]}
    assert set(workers) == {"worker-0", "worker-1", "worker-2"} and all(w["Answers"] for w in workers.values())
    # each answering worker reports the longest its event loop was held in the last minute
    assert all(isinstance(w["WorstStallMillis"], int) and w["WorstStallMillis"] >= 0 for w in workers.values())
    (partition,) = status["Partitions"]
    assert partition["Leader"] in workers and partition["Epoch"] >= 1
    assert sorted(lag["Replica"] for lag in partition["Lag"]) == sorted(partition["Replicas"])
    assert workers[partition["Leader"]]["Leads"] == [partition["Partition"]]
    assert status["Clusters"][0]["Name"] == "local"
