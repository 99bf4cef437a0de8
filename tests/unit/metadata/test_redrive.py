"""RedrivePolicy and RedriveAllowPolicy documents: SQS's checks and the form it stores them in."""

from __future__ import annotations

import json

import pytest

from ferrymq.arn import QueueArn
from ferrymq.errors import InvalidParameterValue
from ferrymq.metadata import redrive

DLQ = "arn:aws:sqs:us-east-1:111111111111:dead"
SOURCE = "arn:aws:sqs:us-east-1:111111111111:source"


@pytest.mark.parametrize("count", [5, "5", " 5", 5.0])
def test_max_receive_count_is_taken_as_number_or_string_and_stored_as_a_number(count: object) -> None:
    raw = json.dumps({"maxReceiveCount": count, "deadLetterTargetArn": DLQ})
    checked = redrive.check_redrive_policy(raw)
    assert checked.to_json() == '{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:111111111111:dead","maxReceiveCount":5}'
    assert checked.target == redrive.QueueArn("us-east-1", "111111111111", "dead")
    assert redrive.stored_redrive_policy({"RedrivePolicy": checked.to_json()}) == checked


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ({"deadLetterTargetArn": DLQ}, "Redrive policy does not contain mandatory attribute: maxReceiveCount."),
        ({"maxReceiveCount": 3}, "Redrive policy does not contain mandatory attribute: deadLetterTargetArn."),
        ({"maxReceiveCount": 0, "deadLetterTargetArn": DLQ},
         "Invalid value for maxReceiveCount: 0, valid values are from 1 to 1000 both inclusive."),
        ({"maxReceiveCount": "1001", "deadLetterTargetArn": DLQ},
         "Invalid value for maxReceiveCount: 1001, valid values are from 1 to 1000 both inclusive."),
        ({"maxReceiveCount": True, "deadLetterTargetArn": DLQ},
         "Invalid value for maxReceiveCount: True, valid values are from 1 to 1000 both inclusive."),
        ({"maxReceiveCount": 3, "deadLetterTargetArn": "dummy"}, "Invalid value for deadLetterTargetArn."),
        ({"maxReceiveCount": 3, "deadLetterTargetArn": "arn:aws:sqs:us-east-1:abc:dead"},
         "Invalid value for deadLetterTargetArn."),
        ({"maxReceiveCount": 3, "deadLetterTargetArn": "arn:aws:sns:us-east-1:111111111111:topic"},
         "Only SQS queues are valid resources for deadLetterTargetArn."),
        ({"maxReceiveCount": 3, "deadLetterTargetArn": "arn:aws:lambda:us-east-1:111111111111:function:f"},
         "Only SQS queues are valid resources for deadLetterTargetArn."),
        ({"maxReceiveCount": 3, "deadLetterTargetArn": "arn:aws:sqs:us-east-1:111111111111:a:b"},
         "Invalid value for deadLetterTargetArn."),
        ({"maxReceiveCount": 3, "deadLetterTargetArn": "arn:aws:sqs::111111111111:dead"},
         "Invalid value for deadLetterTargetArn."),
        ({"maxReceiveCount": 3, "deadLetterTargetArn": 7}, "Invalid value for deadLetterTargetArn."),
        ({"maxReceiveCount": 3, "deadLetterTargetArn": DLQ, "extra": 1},
         "Only following attributes are supported: [maxReceiveCount, deadLetterTargetArn]."),
    ],
)
def test_bad_redrive_policies_name_the_reason(document: dict, reason: str) -> None:
    raw = json.dumps(document)
    with pytest.raises(InvalidParameterValue) as caught:
        redrive.check_redrive_policy(raw)
    assert caught.value.message == f"Value {raw} for parameter RedrivePolicy is invalid. Reason: {reason}"


def test_a_stored_policy_names_its_target_queue_and_a_damaged_one_says_so() -> None:
    other_partition = redrive.check_redrive_policy(
        json.dumps({"maxReceiveCount": 2, "deadLetterTargetArn": "arn:aws-us-gov:sqs:us-gov-west-1:111111111111:d"})
    )
    assert other_partition.target == QueueArn("us-gov-west-1", "111111111111", "d")
    with pytest.raises(ValueError, match="is not a queue ARN"):
        _ = redrive.RedrivePolicy("not-an-arn", 3).target


@pytest.mark.parametrize("raw", ["nope", "[1]", "5"])
def test_a_redrive_policy_must_be_a_json_map(raw: str) -> None:
    with pytest.raises(InvalidParameterValue, match="Redrive policy is not a valid JSON map"):
        redrive.check_redrive_policy(raw)


def test_redrive_allow_policies_are_stored_compactly_and_decide_sources() -> None:
    raw = json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": [SOURCE]})
    by_queue = redrive.check_redrive_allow_policy(raw)
    assert by_queue.to_json() == f'{{"redrivePermission":"byQueue","sourceQueueArns":["{SOURCE}"]}}'
    assert by_queue.permits(SOURCE) and not by_queue.permits(DLQ)
    assert redrive.check_redrive_allow_policy('{"redrivePermission": "allowAll"}').permits(SOURCE)
    deny_all = redrive.check_redrive_allow_policy('{"redrivePermission": "denyAll"}')
    assert not deny_all.permits(SOURCE)
    assert redrive.stored_redrive_allow_policy({"RedriveAllowPolicy": by_queue.to_json()}) == by_queue
    assert redrive.stored_redrive_allow_policy({}) is None


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ({"redrivePermission": "byQueue"}, "When you specify the byQueue permission type, you must also specify one "
                                           "or more sourceQueueArns values."),
        ({"redrivePermission": "byQueue", "sourceQueueArns": []}, "When you specify the byQueue permission type"),
        ({"redrivePermission": "byQueue", "sourceQueueArns": [SOURCE] * 11},
         "The maximum number of source queue ARNs you can specify is 10."),
        ({"redrivePermission": "allowAll", "sourceQueueArns": [SOURCE]},
         "To specify one or more source queue ARNs, you must set redrivePermission to byQueue."),
    ],
)
def test_source_queue_arns_go_with_by_queue_only(document: dict, reason: str) -> None:
    raw = json.dumps(document)
    with pytest.raises(InvalidParameterValue) as caught:
        redrive.check_redrive_allow_policy(raw)
    assert caught.value.message.startswith(f"Value {raw} for parameter RedriveAllowPolicy is invalid.")
    assert reason in caught.value.message


@pytest.mark.parametrize(
    "raw",
    ["x", "[]", '{"redrivePermission": "sometimes"}', '{"redrivePermission": "allowAll", "other": 1}',
     '{"redrivePermission": "byQueue", "sourceQueueArns": "arn"}'],
)
def test_unsupported_redrive_allow_policies(raw: str) -> None:
    with pytest.raises(InvalidParameterValue, match="as it\u2019s in an unsupported format"):
        redrive.check_redrive_allow_policy(raw)
