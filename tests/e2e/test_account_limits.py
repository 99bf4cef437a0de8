"""Per-account limits on queues and shards, through real boto3 clients against a stack started with small ones:
OverLimit past either, concurrent creates and growths that cannot pass them between them, units given back by
DeleteQueue, other accounts unaffected, and the numbers as GetAccountLimits and ``ferrymq accounts limits`` show
them.

Each test uses accounts of its own: the limits are per account, and the stack is shared by the module.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import ferrymq
from tests.e2e.conftest import Stack
from tests.e2e.test_admin_cli import cli, refused_in_one_line
from tests.support.errors import expect_error
from tests.support.sqs_clients import sqs_client
from tests.support.stack import started

MAX_QUEUES = 4
MAX_SHARDS = 8


@pytest.fixture(scope="module")
def limited_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from started(Path(tmp_path_factory.mktemp("account-limits")), {
        "FERRYMQ_ACCOUNT_MAX_QUEUES": str(MAX_QUEUES),
        "FERRYMQ_ACCOUNT_MAX_SHARDS": str(MAX_SHARDS),
    })


Tenant = Callable[[], tuple[str, Any]]


@pytest.fixture
def tenant(limited_stack: Stack, protocol: str) -> Tenant:
    """Makes a new account with a key of its own: (account id, SQS client on the test's protocol)."""
    def make() -> tuple[str, Any]:
        account = f"7{uuid.uuid4().int % 10**11:011d}"
        key_id, secret = limited_stack.create_credentials(account, "tenant")
        return account, sqs_client(limited_stack.endpoint, protocol, access_key=key_id, secret_key=secret,
                                   region=limited_stack.region)
    return make


def api(stack: Stack) -> Any:
    return ferrymq.client("ferrymq", endpoint_url=stack.endpoint, region_name=stack.region,
                          aws_access_key_id=stack.access_key, aws_secret_access_key=stack.secret_key)


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def shard_count(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["FerryMQShardCount"])["Attributes"]
    return int(attributes["FerryMQShardCount"])


def test_the_queue_limit_refuses_the_next_create_and_a_delete_gives_its_room_back(
    limited_stack: Stack, tenant: Tenant,
) -> None:
    # given an account holding as many queues as it may
    account, sqs = tenant()
    urls = [sqs.create_queue(QueueName=name("q"))["QueueUrl"] for _ in range(MAX_QUEUES)]
    # when it creates one more, then it is OverLimit (403), naming the limit
    expect_error(lambda: sqs.create_queue(QueueName=name("over")), "OverLimit", 403, json_code="OverLimit",
                 message=f"({MAX_QUEUES})")
    # and creating one it has already (same attributes) still answers with its URL, taking nothing
    again = sqs.create_queue(QueueName=urls[0].rsplit("/", 1)[1])["QueueUrl"]
    assert again == urls[0]
    assert len(sqs.list_queues().get("QueueUrls", [])) == MAX_QUEUES
    # and another account is not held back by it
    _, other = tenant()
    other.create_queue(QueueName=name("other"))
    # when one queue is deleted, then another may be created
    sqs.delete_queue(QueueUrl=urls[0])
    sqs.create_queue(QueueName=name("after-delete"))
    limits = api(limited_stack).get_account_limits(AccountId=account)
    assert (limits["Queues"], limits["Shards"]) == (MAX_QUEUES, MAX_QUEUES)


def test_shards_count_against_the_limit_at_create_and_when_a_queue_grows(limited_stack: Stack, tenant: Tenant) -> None:
    # given an account with a queue of 6 shards, of the 8 it may have
    account, sqs = tenant()
    big = sqs.create_queue(QueueName=name("big"), Attributes={"FerryMQShardCount": "6"})["QueueUrl"]
    # when a queue of 3 shards is created, then it is OverLimit, and so is a plain FIFO one past that
    expect_error(lambda: sqs.create_queue(QueueName=name("three"), Attributes={"FerryMQShardCount": "3"}),
                 "OverLimit", 403, json_code="OverLimit", message=f"{MAX_SHARDS} shards")
    small = sqs.create_queue(QueueName=name("two"), Attributes={"FerryMQShardCount": "2"})["QueueUrl"]
    expect_error(lambda: sqs.create_queue(QueueName=name("fifo") + ".fifo", Attributes={"FifoQueue": "true"}),
                 "OverLimit", 403)
    # when the big queue grows by one shard, then it is OverLimit and the queue keeps its 6
    expect_error(lambda: sqs.set_queue_attributes(QueueUrl=big, Attributes={"FerryMQShardCount": "7"}),
                 "OverLimit", 403, json_code="OverLimit")
    assert shard_count(sqs, big) == 6
    # and with other attributes in the same request, none of them is changed either
    expect_error(lambda: sqs.set_queue_attributes(QueueUrl=big, Attributes={
        "FerryMQShardCount": "8", "VisibilityTimeout": "99"}), "OverLimit", 403)
    attributes = sqs.get_queue_attributes(QueueUrl=big, AttributeNames=["All"])["Attributes"]
    assert (attributes["FerryMQShardCount"], attributes["VisibilityTimeout"]) == ("6", "30")
    limits = api(limited_stack).get_account_limits(AccountId=account)
    assert (limits["Queues"], limits["Shards"]) == (2, MAX_SHARDS)
    # when the small queue is deleted, then its shards are given back and the big one may grow
    sqs.delete_queue(QueueUrl=small)
    sqs.set_queue_attributes(QueueUrl=big, Attributes={"FerryMQShardCount": "8"})
    assert shard_count(sqs, big) == 8
    # and messages still go through the grown queue
    sqs.send_message(QueueUrl=big, MessageBody="after growing")
    got = sqs.receive_message(QueueUrl=big, WaitTimeSeconds=5).get("Messages", [])
    assert [m["Body"] for m in got] == ["after growing"]


def _outcome(call: Callable[[], Any]) -> str:
    try:
        call()
    except ClientError as exc:
        return str(exc.response["Error"]["Code"])
    return "ok"


def test_concurrent_creates_and_growths_never_pass_the_limits(limited_stack: Stack, tenant: Tenant) -> None:
    # given a new account, when 12 CreateQueue calls race, then exactly the limit's worth succeed
    account, sqs = tenant()
    with ThreadPoolExecutor(max_workers=12) as pool:
        outcomes = list(pool.map(lambda i: _outcome(lambda: sqs.create_queue(QueueName=f"race-{i}")), range(12)))
    assert sorted(outcomes) == ["OverLimit"] * (12 - MAX_QUEUES) + ["ok"] * MAX_QUEUES, outcomes
    urls = sqs.list_queues()["QueueUrls"]
    assert len(urls) == MAX_QUEUES
    # when two queues race to grow to 4 shards each (4 + 3 + 3 would pass 8), then only one of them grows
    with ThreadPoolExecutor(max_workers=2) as pool:
        grown = list(pool.map(lambda url: _outcome(lambda: sqs.set_queue_attributes(
            QueueUrl=url, Attributes={"FerryMQShardCount": "4"})), urls[:2]))
    assert sorted(grown) == ["OverLimit", "ok"], grown
    assert sorted(shard_count(sqs, url) for url in urls) == [1, 1, 1, 4]
    limits = api(limited_stack).get_account_limits(AccountId=account)
    assert (limits["Queues"], limits["Shards"]) == (MAX_QUEUES, 7)


def test_the_api_and_the_cli_show_each_accounts_limits_and_usage(limited_stack: Stack, tenant: Tenant) -> None:
    # given an account with one queue of 3 shards and one of 1
    account, sqs = tenant()
    sqs.create_queue(QueueName=name("three"), Attributes={"FerryMQShardCount": "3"})
    sqs.create_queue(QueueName=name("one"))
    # then GetAccountLimits and `ferrymq accounts limits` show its limits and what it uses
    expected = {"AccountId": account, "MaxQueues": MAX_QUEUES, "MaxShards": MAX_SHARDS, "Queues": 2, "Shards": 4}
    shown = api(limited_stack).get_account_limits(AccountId=account)
    shown.pop("ResponseMetadata")
    assert shown == expected
    assert json.loads(limited_stack.ferrymq("accounts", "limits", account, "--json")) == expected
    table = limited_stack.ferrymq("accounts", "limits", account)
    assert account in table and "queues" in table and "shards" in table
    # and an account that never made a queue uses nothing
    fresh = f"6{uuid.uuid4().int % 10**11:011d}"
    assert api(limited_stack).get_account_limits(AccountId=fresh)["Queues"] == 0


def test_account_limits_are_for_admin_keys_and_a_bad_account_id_is_refused(limited_stack: Stack) -> None:
    admin = api(limited_stack)
    with pytest.raises(admin.exceptions.InvalidParameterValue):
        admin.get_account_limits(AccountId="12345")
    account = f"5{uuid.uuid4().int % 10**11:011d}"
    key_id, secret = limited_stack.create_credentials(account, "plain")
    plain = ferrymq.client("ferrymq", endpoint_url=limited_stack.endpoint, region_name=limited_stack.region,
                           aws_access_key_id=key_id, aws_secret_access_key=secret)
    with pytest.raises(plain.exceptions.AccessDenied):
        plain.get_account_limits(AccountId=account)
    # and the command refuses a bad account id before asking
    refused_in_one_line(cli(limited_stack, "accounts", "limits", "12"), 2, "12 digits")


def test_an_account_whose_queues_predate_its_counts_is_counted_from_its_queues(
    limited_stack: Stack, tenant: Tenant,
) -> None:
    # given an account with queues of 1 and 5 shards whose counts are not kept (as before the limits existed)
    account, sqs = tenant()
    sqs.create_queue(QueueName=name("one"))
    sqs.create_queue(QueueName=name("five"), Attributes={"FerryMQShardCount": "5"})
    table = limited_stack.env.get("FERRYMQ_TABLE_PREFIX", "ferrymq-") + "queues"
    limited_stack.aws_client("dynamodb").delete_item(
        TableName=table, Key={"account": {"S": "#usage"}, "name": {"S": account}})
    # then its usage is counted from its queues
    limits = api(limited_stack).get_account_limits(AccountId=account)
    assert (limits["Queues"], limits["Shards"]) == (2, 6)
    # and a queue of 3 shards would pass the limit, one of 2 does not
    expect_error(lambda: sqs.create_queue(QueueName=name("three"), Attributes={"FerryMQShardCount": "3"}),
                 "OverLimit", 403)
    sqs.create_queue(QueueName=name("two"), Attributes={"FerryMQShardCount": "2"})
    limits = api(limited_stack).get_account_limits(AccountId=account)
    assert (limits["Queues"], limits["Shards"]) == (3, MAX_SHARDS)
