"""Queue-level SQS parity through real boto3 clients on both wire protocols: tags, permissions and queue policies,
dead-letter settings, FIFO queue attributes and server-side encryption attributes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.errors import expect_error
from tests.support.sqs_clients import sqs_client

OWNER = "000000000000"
STRANGER = "210987654321"


def _name(prefix: str, fifo: bool = False) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}" + (".fifo" if fifo else "")


def _arn(sqs: Any, url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def _invalid_parameter(call: Callable[[], Any], message: str | None = None) -> None:
    expect_error(call, "InvalidParameterValue", 400, json_code="InvalidParameterValueException", message=message)


@pytest.fixture(scope="module")
def stranger_keys(stack: Any) -> tuple[str, str]:
    return stack.create_credentials(STRANGER, "bob")


@pytest.fixture
def stranger(stack: Any, protocol: str, stranger_keys: tuple[str, str]) -> Any:
    """A client of another account than the ``sqs`` client's."""
    return sqs_client(stack.endpoint, protocol, access_key=stranger_keys[0], secret_key=stranger_keys[1])


# --- tags ------------------------------------------------------------------------------------------------


def test_tag_untag_and_list_queue_tags(sqs: Any) -> None:
    # given a queue created with tags
    url = sqs.create_queue(QueueName=_name("tags"), tags={"team": "core", "tier": ""})["QueueUrl"]
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "core", "tier": ""}
    # when tags are added, then a key already there takes the new value
    sqs.tag_queue(QueueUrl=url, Tags={"team": "edge", "env": "dev"})
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "edge", "tier": "", "env": "dev"}
    # when tags are removed (unknown keys included), then only the rest remain
    sqs.untag_queue(QueueUrl=url, TagKeys=["team", "tier", "absent"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"env": "dev"}
    # and a queue without tags answers without a Tags member
    sqs.untag_queue(QueueUrl=url, TagKeys=["env"])
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)


def test_tags_breaking_sqs_rules_are_refused(sqs: Any) -> None:
    name = _name("badtags")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    expect_error(lambda: sqs.tag_queue(QueueUrl=url, Tags={}), "MissingParameter", 400,
                 json_code="MissingRequiredParameterException", message="The request must contain the parameter Tags.")
    _invalid_parameter(lambda: sqs.tag_queue(QueueUrl=url, Tags={f"k{i}": "v" for i in range(51)}),
                       f"Too many tags added for queue {name}.")
    _invalid_parameter(lambda: sqs.tag_queue(QueueUrl=url, Tags={"k" * 129: "v"}),
                       "Tag keys must be between 1 and 128 characters in length.")
    _invalid_parameter(lambda: sqs.tag_queue(QueueUrl=url, Tags={"a#b": "v"}), "Tag keys may only contain")
    _invalid_parameter(lambda: sqs.tag_queue(QueueUrl=url, Tags={"aws:owner": "me"}), "reserved prefix aws:")
    _invalid_parameter(lambda: sqs.tag_queue(QueueUrl=url, Tags={"k": "v" * 257}), "Tag values must be")
    _invalid_parameter(lambda: sqs.untag_queue(QueueUrl=url, TagKeys=[]),
                       "Tag keys must be between 1 and 128 characters in length.")
    _invalid_parameter(lambda: sqs.create_queue(QueueName=_name("badtags"), tags={"aws:x": "y"}))
    # and a refused request changes nothing
    assert "Tags" not in sqs.list_queue_tags(QueueUrl=url)


def test_tag_actions_are_for_the_owner_only(sqs: Any, stranger: Any) -> None:
    # given a queue whose policy grants another account everything
    url = sqs.create_queue(QueueName=_name("owntags"), tags={"k": "v"})["QueueUrl"]
    everything = {"Version": "2012-10-17",
                  "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "sqs:*", "Resource": "*"}]}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(everything)})
    # then cross-account permissions still don't apply to the owner-only actions
    for call in (
        lambda: stranger.list_queue_tags(QueueUrl=url),
        lambda: stranger.tag_queue(QueueUrl=url, Tags={"a": "b"}),
        lambda: stranger.untag_queue(QueueUrl=url, TagKeys=["k"]),
        lambda: stranger.add_permission(QueueUrl=url, Label="l", AWSAccountIds=[STRANGER], Actions=["*"]),
        lambda: stranger.remove_permission(QueueUrl=url, Label="l"),
        lambda: stranger.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "1"}),
        lambda: stranger.delete_queue(QueueUrl=url),
    ):
        expect_error(call, "AccessDenied", 403, json_code="AccessDeniedException")
    # while the granted ones work
    stranger.send_message(QueueUrl=url, MessageBody="hello")
    assert stranger.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])


# --- permissions and policies ------------------------------------------------------------------------------


def test_add_and_remove_permission_edit_the_policy(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("perm"))["QueueUrl"]
    arn = _arn(sqs, url)
    # when a permission is added, then the policy holds SQS's statement for it
    sqs.add_permission(QueueUrl=url, Label="send", AWSAccountIds=[STRANGER], Actions=["SendMessage"])
    document = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    assert document["Version"] == "2008-10-17" and document["Id"] == f"{arn}/SQSDefaultPolicy"
    assert document["Statement"] == [{"Sid": "send", "Effect": "Allow",
                                      "Principal": {"AWS": f"arn:aws:iam::{STRANGER}:root"},
                                      "Action": "SQS:SendMessage", "Resource": arn}]
    # when a second is added and the first removed, then only the second stays
    sqs.add_permission(QueueUrl=url, Label="read", AWSAccountIds=[STRANGER, "333333333333"],
                       Actions=["ReceiveMessage", "DeleteMessage"])
    sqs.remove_permission(QueueUrl=url, Label="send")
    document = json.loads(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    assert [s["Sid"] for s in document["Statement"]] == ["read"]
    # when the last is removed, then the queue has no policy at all
    sqs.remove_permission(QueueUrl=url, Label="read")
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])


def test_permission_errors(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("permerr"))["QueueUrl"]
    sqs.add_permission(QueueUrl=url, Label="taken", AWSAccountIds=[STRANGER], Actions=["*"])
    _invalid_parameter(lambda: sqs.add_permission(QueueUrl=url, Label="taken", AWSAccountIds=[STRANGER],
                                                  Actions=["SendMessage"]),
                       "Value taken for parameter Label is invalid. Reason: Already exists.")
    _invalid_parameter(lambda: sqs.remove_permission(QueueUrl=url, Label="never"),
                       "Value never for parameter Label is invalid. Reason: can't find label.")
    _invalid_parameter(lambda: sqs.add_permission(QueueUrl=url, Label="x", AWSAccountIds=[STRANGER],
                                                  Actions=["DeleteQueue"]),
                       "Value SQS:DeleteQueue for parameter ActionName is invalid. Reason: Only the queue owner is "
                       "allowed to invoke this action.")
    _invalid_parameter(lambda: sqs.add_permission(QueueUrl=url, Label="x", AWSAccountIds=[STRANGER],
                                                  Actions=["SendMessageBatch"]),
                       "Please refer to the appropriate WSDL for a list of valid actions.")
    _invalid_parameter(lambda: sqs.add_permission(QueueUrl=url, Label="x", AWSAccountIds=[], Actions=["*"]),
                       "Value [] for parameter PrincipalId is invalid. Reason: Unable to verify.")
    _invalid_parameter(lambda: sqs.add_permission(QueueUrl=url, Label="x", AWSAccountIds=["bob"], Actions=["*"]),
                       "for parameter PrincipalId is invalid")
    _invalid_parameter(lambda: sqs.add_permission(QueueUrl=url, Label="bad label", AWSAccountIds=[STRANGER],
                                                  Actions=["*"]),
                       "Value bad label for parameter Label is invalid.")
    expect_error(lambda: sqs.add_permission(QueueUrl=url, Label="x", AWSAccountIds=[STRANGER], Actions=[]),
                 "MissingParameter", 400, json_code="MissingRequiredParameterException")
    eight = ["SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility", "GetQueueAttributes",
             "GetQueueUrl", "PurgeQueue", "ListDeadLetterSourceQueues"]
    expect_error(lambda: sqs.add_permission(QueueUrl=url, Label="x", AWSAccountIds=[STRANGER], Actions=eight),
                 "OverLimit", 403, message="8 Actions were found, maximum allowed is 7.")


def test_policy_documents_are_checked(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("policy"))["QueueUrl"]
    for bad in ("not json", json.dumps({"Version": "2012-10-17", "Statement": []}),
                json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sqs:*"}]})):
        expect_error(lambda bad=bad: sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": bad}),
                     "InvalidAttributeValue", 400, message="Invalid value for the parameter Policy.")
    expect_error(lambda: sqs.create_queue(QueueName=_name("policy"), Attributes={"Policy": "{"}),
                 "InvalidAttributeValue", 400)
    statement = {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": "*"}
    too_many = json.dumps({"Version": "2012-10-17", "Statement": [statement] * 21})
    expect_error(lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": too_many}), "OverLimit", 403,
                 message="21 statements were found in the submitted policy, max allowed is 20")
    # when a valid policy is set, then it reads back as sent; an empty one removes it
    good = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": good})
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"] == good
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": ""})
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])


def test_another_account_does_what_the_policy_allows_and_nothing_else(sqs: Any, stranger: Any) -> None:
    name = _name("shared")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    # given no policy, then the queue is closed and invisible to another account
    expect_error(lambda: stranger.send_message(QueueUrl=url, MessageBody="x"), "AccessDenied", 403,
                 json_code="AccessDeniedException")
    expect_error(lambda: stranger.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=OWNER),
                 "AWS.SimpleQueueService.NonExistentQueue", 400)
    # when the owner grants sending and finding it
    sqs.add_permission(QueueUrl=url, Label="producer", AWSAccountIds=[STRANGER],
                       Actions=["SendMessage", "GetQueueUrl"])
    # then the other account finds it and sends, single and batched
    assert stranger.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=OWNER)["QueueUrl"] == url
    stranger.send_message(QueueUrl=url, MessageBody="one")
    sent = stranger.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "two"}])
    assert len(sent["Successful"]) == 1
    # but may not receive, purge or read attributes
    for call in (
        lambda: stranger.receive_message(QueueUrl=url),
        lambda: stranger.purge_queue(QueueUrl=url),
        lambda: stranger.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]),
    ):
        expect_error(call, "AccessDenied", 403)
    bodies = {m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]}
    assert bodies == {"one", "two"}
    # and a missing queue of the owner's is no different from a closed one
    missing = url.rsplit("/", 1)[0] + "/" + _name("missing")
    expect_error(lambda: stranger.send_message(QueueUrl=missing, MessageBody="x"), "AccessDenied", 403)


def test_deny_statements_and_conditions_close_the_queue(sqs: Any, stranger: Any) -> None:
    url = sqs.create_queue(QueueName=_name("denied"))["QueueUrl"]
    arn = _arn(sqs, url)
    allow = {"Effect": "Allow", "Principal": {"AWS": STRANGER}, "Action": "sqs:*", "Resource": arn}
    deny_send = {"Effect": "Deny", "Principal": "*", "Action": "sqs:Send*", "Resource": arn}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={
        "Policy": json.dumps({"Version": "2012-10-17", "Statement": [allow, deny_send]})})
    # then the explicit Deny wins for sending while receiving is allowed
    expect_error(lambda: stranger.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"}]),
                 "AccessDenied", 403)
    assert "Messages" not in stranger.receive_message(QueueUrl=url)
    # when the only Allow depends on a condition, then it grants nothing
    conditional = {**allow, "Condition": {"ArnEquals": {"aws:SourceArn": "arn:aws:sns:us-east-1:1:t"}}}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={
        "Policy": json.dumps({"Version": "2012-10-17", "Statement": [conditional]})})
    expect_error(lambda: stranger.receive_message(QueueUrl=url), "AccessDenied", 403)


# --- dead-letter queues ---------------------------------------------------------------------------------------


def _redrive(arn: str, count: Any = 3) -> str:
    return json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": count})


def test_list_dead_letter_source_queues(sqs: Any) -> None:
    dlq = sqs.create_queue(QueueName=_name("dlq"))["QueueUrl"]
    dlq_arn = _arn(sqs, dlq)
    prefix = _name("src")
    sources = sorted(
        sqs.create_queue(QueueName=f"{prefix}-{i}", Attributes={"RedrivePolicy": _redrive(dlq_arn)})["QueueUrl"]
        for i in range(3)
    )
    sqs.create_queue(QueueName=_name("unrelated"))
    # then every source is listed, and pages follow MaxResults
    assert sorted(sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"]) == sources
    seen: list[str] = []
    kwargs: dict[str, Any] = {"QueueUrl": dlq, "MaxResults": 2}
    while True:
        page = sqs.list_dead_letter_source_queues(**kwargs)
        assert len(page.get("queueUrls", [])) <= 2
        seen.extend(page.get("queueUrls", []))
        if "NextToken" not in page:
            break
        kwargs["NextToken"] = page["NextToken"]
    assert sorted(seen) == sources
    # and a queue nobody redrives to has no sources
    assert sqs.list_dead_letter_source_queues(QueueUrl=sources[0]).get("queueUrls", []) == []
    _invalid_parameter(lambda: sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=1001))
    _invalid_parameter(lambda: sqs.list_dead_letter_source_queues(QueueUrl=dlq, MaxResults=0))
    missing = dlq.rsplit("/", 1)[0] + "/" + _name("missing")
    expect_error(lambda: sqs.list_dead_letter_source_queues(QueueUrl=missing),
                 "AWS.SimpleQueueService.NonExistentQueue", 400)


def test_redrive_policy_is_checked_and_rendered_as_sqs_does(sqs: Any) -> None:
    dlq = sqs.create_queue(QueueName=_name("dlq"))["QueueUrl"]
    dlq_arn = _arn(sqs, dlq)
    fifo_dlq = sqs.create_queue(QueueName=_name("dlq", fifo=True), Attributes={"FifoQueue": "true"})["QueueUrl"]
    source = sqs.create_queue(QueueName=_name("src"))["QueueUrl"]

    def set_redrive(value: str) -> Callable[[], Any]:
        return lambda: sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": value})

    missing_arn = dlq_arn.rsplit(":", 1)[0] + ":" + _name("nothere")
    _invalid_parameter(set_redrive(_redrive(missing_arn)), "Reason: Dead letter target does not exist.")
    _invalid_parameter(set_redrive("not json"), "Redrive policy is not a valid JSON map.")
    _invalid_parameter(set_redrive(_redrive(dlq_arn, 0)), "Invalid value for maxReceiveCount: 0")
    _invalid_parameter(set_redrive(_redrive("dummy")), "Reason: Invalid value for deadLetterTargetArn.")
    _invalid_parameter(set_redrive(json.dumps({"deadLetterTargetArn": dlq_arn})),
                       "Redrive policy does not contain mandatory attribute: maxReceiveCount.")
    _invalid_parameter(set_redrive(_redrive(dlq_arn.replace(OWNER, "123456789012"))),
                       "Dead-letter target owner should be same as the source.")
    expect_error(set_redrive(_redrive(_arn(sqs, fifo_dlq))), "InvalidAttributeName", 400,
                 message="Dead-letter queue must be same type of queue as the source")
    # when the count is sent as a string, then SQS's rendering has it as a number
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": _redrive(dlq_arn, "5")})
    shown = sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["RedrivePolicy"])["Attributes"]
    assert shown["RedrivePolicy"] == json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 5},
                                                separators=(",", ":"))
    # and an empty policy removes it
    sqs.set_queue_attributes(QueueUrl=source, Attributes={"RedrivePolicy": ""})
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=source, AttributeNames=["RedrivePolicy"])


def test_redrive_allow_policy_is_checked_and_enforced(sqs: Any) -> None:
    dlq = sqs.create_queue(QueueName=_name("dlq"))["QueueUrl"]
    dlq_arn = _arn(sqs, dlq)
    allowed_name, refused_name = _name("allowed"), _name("refused")
    allowed_arn = dlq_arn.rsplit(":", 1)[0] + ":" + allowed_name

    def set_allow(value: Any) -> Callable[[], Any]:
        return lambda: sqs.set_queue_attributes(QueueUrl=dlq, Attributes={"RedriveAllowPolicy": json.dumps(value)})

    _invalid_parameter(set_allow({"redrivePermission": "byQueue"}),
                       "When you specify the byQueue permission type, you must also specify one or more "
                       "sourceQueueArns values.")
    _invalid_parameter(set_allow({"redrivePermission": "byQueue", "sourceQueueArns": [allowed_arn] * 11}),
                       "The maximum number of source queue ARNs you can specify is 10.")
    _invalid_parameter(set_allow({"redrivePermission": "allowAll", "sourceQueueArns": [allowed_arn]}),
                       "you must set redrivePermission to byQueue")
    _invalid_parameter(set_allow({"redrivePermission": "sometimes"}), "in an unsupported format")
    # given a dead-letter queue that admits one named source
    set_allow({"redrivePermission": "byQueue", "sourceQueueArns": [allowed_arn]})()
    shown = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["RedriveAllowPolicy"])["Attributes"]
    assert json.loads(shown["RedriveAllowPolicy"]) == {"redrivePermission": "byQueue", "sourceQueueArns": [allowed_arn]}
    # then that source may name it and another may not
    naming_it = {"RedrivePolicy": _redrive(dlq_arn)}
    sqs.create_queue(QueueName=allowed_name, Attributes=naming_it)
    _invalid_parameter(lambda: sqs.create_queue(QueueName=refused_name, Attributes=naming_it),
                       "RedrivePolicy is invalid")
    # when it denies all, then existing queues may not newly name it either
    set_allow({"redrivePermission": "denyAll"})()
    refused = sqs.create_queue(QueueName=refused_name)["QueueUrl"]
    _invalid_parameter(lambda: sqs.set_queue_attributes(QueueUrl=refused, Attributes=naming_it))


# --- FIFO queue attributes ---------------------------------------------------------------------------------------


def test_fifo_queue_creation_and_its_attributes(sqs: Any) -> None:
    name = _name("fifo", fifo=True)
    url = sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})[
        "QueueUrl"]
    assert url.endswith(f"/{OWNER}/{name}")
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert {k: attrs[k] for k in ("FifoQueue", "ContentBasedDeduplication", "DeduplicationScope",
                                  "FifoThroughputLimit", "SqsManagedSseEnabled")} == {
        "FifoQueue": "true", "ContentBasedDeduplication": "true", "DeduplicationScope": "queue",
        "FifoThroughputLimit": "perQueue", "SqsManagedSseEnabled": "true"}
    # when high throughput is turned on as a pair, then it is kept
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DeduplicationScope": "messageGroup",
                                                       "FifoThroughputLimit": "perMessageGroupId"})
    picked = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DeduplicationScope", "FifoThroughputLimit"])
    assert picked["Attributes"] == {"DeduplicationScope": "messageGroup", "FifoThroughputLimit": "perMessageGroupId"}
    # and creating it again with other FIFO settings is refused
    expect_error(lambda: sqs.create_queue(QueueName=name, Attributes={"FifoQueue": "true",
                                                                      "ContentBasedDeduplication": "false"}),
                 "QueueAlreadyExists", 400, json_code="QueueNameExists")
    # while a standard queue shows none of the FIFO attributes
    standard = sqs.create_queue(QueueName=_name("std"))["QueueUrl"]
    assert "FifoQueue" not in sqs.get_queue_attributes(QueueUrl=standard, AttributeNames=["All"])["Attributes"]


def test_fifo_attribute_errors(sqs: Any) -> None:
    _invalid_parameter(lambda: sqs.create_queue(QueueName=_name("nosfx", fifo=True)),
                       "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
    _invalid_parameter(lambda: sqs.create_queue(QueueName=_name("noattr"), Attributes={"FifoQueue": "true"}),
                       "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, "
                       "must end with .fifo suffix and be 1 to 80 in length.")
    _invalid_parameter(lambda: sqs.create_queue(QueueName=_name("hi", fifo=True), Attributes={
        "FifoQueue": "true", "FifoThroughputLimit": "perMessageGroupId"}),
        "The perMessageGroupId value is allowed only when the value for DeduplicationScope is messageGroup")
    expect_error(lambda: sqs.create_queue(QueueName=_name("scope", fifo=True), Attributes={
        "FifoQueue": "true", "DeduplicationScope": "everywhere"}), "InvalidAttributeValue", 400,
        message="Invalid value for the parameter DeduplicationScope.")
    expect_error(lambda: sqs.create_queue(QueueName=_name("std"), Attributes={"ContentBasedDeduplication": "true"}),
                 "InvalidAttributeName", 400, message="Unknown Attribute ContentBasedDeduplication.")
    fifo = sqs.create_queue(QueueName=_name("fixed", fifo=True), Attributes={"FifoQueue": "true"})["QueueUrl"]
    expect_error(lambda: sqs.set_queue_attributes(QueueUrl=fifo, Attributes={"FifoQueue": "false"}),
                 "InvalidAttributeValue", 400,
                 message="Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.")
    standard = sqs.create_queue(QueueName=_name("std"))["QueueUrl"]
    expect_error(lambda: sqs.set_queue_attributes(QueueUrl=standard, Attributes={"FifoQueue": "true"}),
                 "InvalidAttributeName", 400, message="Unknown Attribute FifoQueue.")


# --- server-side encryption and read-only attributes ---------------------------------------------------------------


def test_sse_attributes_and_read_only_attributes(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=_name("sse"))["QueueUrl"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["SqsManagedSseEnabled"] == "true" and "KmsMasterKeyId" not in attrs
    assert {"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed", "CreatedTimestamp", "LastModifiedTimestamp",
            "QueueArn"} <= attrs.keys()
    # when a KMS key is chosen, then SSE-SQS goes off and the data key reuse period shows its default
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": "alias/aws/sqs"})
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (attrs["KmsMasterKeyId"], attrs["KmsDataKeyReusePeriodSeconds"], attrs["SqsManagedSseEnabled"]) == (
        "alias/aws/sqs", "300", "false")
    # and both kinds at once are refused
    expect_error(lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={
        "KmsMasterKeyId": "alias/aws/sqs", "SqsManagedSseEnabled": "true"}), "InvalidAttributeName", 400,
        message="You can use one type of server-side encryption (SSE) at one time.")
    expect_error(lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsDataKeyReusePeriodSeconds": "59"}),
                 "InvalidAttributeValue", 400)
