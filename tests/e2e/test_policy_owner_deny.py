"""A queue policy's explicit Deny binds the queue's owner too, over both wire protocols; Allows never restrict
it; the account's admin key can always take the policy off again."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.conftest import Stack
from tests.support.errors import expect_error
from tests.support.policies import queue_with_arn, set_policy
from tests.support.sqs_clients import sqs_client

OTHER = "525252525252"


@pytest.fixture(scope="module")
def user_keys(stack: Stack) -> tuple[str, str]:
    """A key of a user (not an admin) of the stack's own account."""
    return stack.create_credentials(stack.env.get("FERRYMQ_ACCOUNT_ID", "000000000000"), "alice")


@pytest.fixture
def user(stack: Stack, protocol: str, user_keys: tuple[str, str]) -> Any:
    return sqs_client(stack.endpoint, protocol, access_key=user_keys[0], secret_key=user_keys[1])


def _denied(call: Any) -> None:
    expect_error(call, "AccessDenied", 403, json_code="AccessDeniedException", message="is denied")


def test_an_explicit_deny_of_the_owners_account_refuses_its_sends(sqs: Any, user: Any) -> None:
    url, arn = queue_with_arn(sqs, "owner-deny")
    account = arn.split(":")[4]
    # given a Deny of SendMessage to the owner's own account
    set_policy(sqs, url, {"Effect": "Deny", "Principal": {"AWS": account}, "Action": "sqs:SendMessage",
                           "Resource": arn})
    # then the owner's sends are refused as another account's are, single and batched, whichever key it uses
    _denied(lambda: sqs.send_message(QueueUrl=url, MessageBody="x"))
    _denied(lambda: sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"}]))
    _denied(lambda: user.send_message(QueueUrl=url, MessageBody="x"))
    # and what the Deny does not name is still the owner's to do
    assert "Messages" not in user.receive_message(QueueUrl=url)
    assert sqs.get_queue_url(QueueName=url.rsplit("/", 1)[1])["QueueUrl"] == url
    # when the policy is taken off, then the owner sends again
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": ""})
    assert user.send_message(QueueUrl=url, MessageBody="sent")["MessageId"]
    sqs.delete_queue(QueueUrl=url)


def test_the_owner_needs_no_allow_in_a_policy_that_allows_only_others(sqs: Any, user: Any) -> None:
    url, arn = queue_with_arn(sqs, "owner-deny")
    set_policy(sqs, url, {"Effect": "Allow", "Principal": {"AWS": OTHER}, "Action": "sqs:SendMessage",
                           "Resource": arn})
    assert user.send_message(QueueUrl=url, MessageBody="mine")["MessageId"]
    assert [m["Body"] for m in user.receive_message(QueueUrl=url)["Messages"]] == ["mine"]
    user.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "45"})
    sqs.delete_queue(QueueUrl=url)


def test_a_deny_of_plain_http_binds_the_owner_and_its_admin_key_can_take_it_off(sqs: Any, user: Any) -> None:
    url, arn = queue_with_arn(sqs, "owner-deny")
    name = url.rsplit("/", 1)[1]
    # given the usual "TLS only" Deny (this stack serves plain HTTP)
    set_policy(sqs, url, {"Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": arn,
                           "Condition": {"Bool": {"aws:SecureTransport": "false"}}})
    # then every request of the owner's user is refused, the owner-only ones included
    _denied(lambda: user.send_message(QueueUrl=url, MessageBody="x"))
    _denied(lambda: user.receive_message(QueueUrl=url))
    _denied(lambda: user.get_queue_url(QueueName=name))
    _denied(lambda: user.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]))
    _denied(lambda: user.set_queue_attributes(QueueUrl=url, Attributes={"Policy": ""}))
    _denied(lambda: user.remove_permission(QueueUrl=url, Label="none"))
    _denied(lambda: user.tag_queue(QueueUrl=url, Tags={"k": "v"}))
    _denied(lambda: user.purge_queue(QueueUrl=url))
    _denied(lambda: user.delete_queue(QueueUrl=url))
    # and the admin key is refused all but reading and changing the policy
    _denied(lambda: sqs.send_message(QueueUrl=url, MessageBody="x"))
    _denied(lambda: sqs.delete_queue(QueueUrl=url))
    policy = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"]
    assert json.loads(policy)["Statement"][0]["Effect"] == "Deny"
    # when the admin key takes the policy off, then the owner's user may do everything again
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": ""})
    assert user.send_message(QueueUrl=url, MessageBody="after")["MessageId"]
    user.delete_queue(QueueUrl=url)


def test_the_admin_key_removes_a_lockout_deny_by_its_label(sqs: Any, user: Any) -> None:
    url, arn = queue_with_arn(sqs, "owner-deny")
    # given a Deny on everything, with a Sid, beside a permission AddPermission wrote
    sqs.add_permission(QueueUrl=url, Label="other-sends", AWSAccountIds=[OTHER], Actions=["SendMessage"])
    document = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    document["Statement"].append({"Sid": "lockout", "Effect": "Deny", "Principal": "*", "Action": "*",
                                  "Resource": arn})
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(document)})
    _denied(lambda: user.remove_permission(QueueUrl=url, Label="lockout"))
    # when the admin key removes the Deny by its label, then the owner's user is free again
    sqs.remove_permission(QueueUrl=url, Label="lockout")
    assert user.send_message(QueueUrl=url, MessageBody="free")["MessageId"]
    user.delete_queue(QueueUrl=url)


def test_a_deny_binds_the_owner_for_message_move_tasks_too(sqs: Any, user: Any) -> None:
    # given a dead-letter queue whose policy denies its own account the move-task actions
    dlq_url, dlq_arn = queue_with_arn(sqs, "owner-deny")
    source_url, _ = queue_with_arn(sqs, "owner-deny")
    sqs.set_queue_attributes(QueueUrl=source_url, Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "1"})})
    account = dlq_arn.split(":")[4]
    set_policy(sqs, dlq_url, {"Effect": "Deny", "Principal": {"AWS": account},
                               "Action": ["sqs:StartMessageMoveTask", "sqs:ListMessageMoveTasks"],
                               "Resource": dlq_arn})
    # then starting or listing its move tasks is refused to the owner, as any other denied action is
    _denied(lambda: user.start_message_move_task(SourceArn=dlq_arn))
    _denied(lambda: user.list_message_move_tasks(SourceArn=dlq_arn))
    # and once the policy is off, the owner starts one
    sqs.set_queue_attributes(QueueUrl=dlq_url, Attributes={"Policy": ""})
    assert user.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    sqs.delete_queue(QueueUrl=source_url)
    sqs.delete_queue(QueueUrl=dlq_url)
