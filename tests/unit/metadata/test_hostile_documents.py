"""Documents a client sets as queue attributes, and task handles, built to break a reader: each is refused
with SQS's error for it."""

from __future__ import annotations

import base64
import re

import pytest

from ferrymq.errors import InvalidAttributeValue, InvalidParameterValue
from ferrymq.frontend.actions.move_tasks import _read_task_handle, _task_handle
from ferrymq.metadata import queue_attributes, redrive

HUGE = "1" * 4301
NESTED = "[" * 3000 + "]" * 3000
DLQ = "arn:aws:sqs:us-east-1:000000000000:dlq"
_INVALID_HANDLE = re.escape("Value for parameter TaskHandle is invalid.")


@pytest.mark.parametrize("value", [HUGE, "\u0663", "\u00b2", "1_0", " ", ""])
def test_integer_attributes_take_ascii_digits_only(value: str) -> None:
    with pytest.raises(InvalidAttributeValue, match="VisibilityTimeout"):
        queue_attributes.check("VisibilityTimeout", value)


def test_integer_attributes_still_take_signs_and_surrounding_space() -> None:
    assert queue_attributes.check("VisibilityTimeout", " +30 ") == "30"


@pytest.mark.parametrize(("name", "error"), [("Policy", InvalidAttributeValue),
                                             ("RedrivePolicy", InvalidParameterValue),
                                             ("RedriveAllowPolicy", InvalidParameterValue)])
def test_deeply_nested_documents_are_refused(name: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        queue_attributes.check(name, NESTED)


@pytest.mark.parametrize("count", [f'"{HUGE}"', '"+5"', '"-5"', '"\u0663"'])
def test_a_max_receive_count_string_that_is_no_count_is_out_of_range(count: str) -> None:
    with pytest.raises(InvalidParameterValue, match="valid values are from 1 to 1000 both inclusive"):
        redrive.check_redrive_policy(f'{{"maxReceiveCount":{count},"deadLetterTargetArn":"{DLQ}"}}')


def test_a_max_receive_count_string_of_digits_is_still_a_count() -> None:
    policy = redrive.check_redrive_policy(f'{{"maxReceiveCount":" 7 ","deadLetterTargetArn":"{DLQ}"}}')
    assert policy.max_receive_count == 7


def test_a_max_receive_count_number_past_any_double_is_no_json_map() -> None:
    with pytest.raises(InvalidParameterValue, match="Redrive policy is not a valid JSON map"):
        redrive.check_redrive_policy(f'{{"maxReceiveCount":{HUGE},"deadLetterTargetArn":"{DLQ}"}}')


@pytest.mark.parametrize("decoded", [NESTED.encode(), b"[" * 700 + b"]" * 700, b'{"taskId":[1],"sourceArn":"x"}',
                                     b'{"taskId":"t"}', b"\xff\xfe", b"null"])
def test_task_handles_that_are_not_ours_are_invalid(decoded: bytes) -> None:
    with pytest.raises(InvalidParameterValue, match=_INVALID_HANDLE):
        _read_task_handle(base64.b64encode(decoded).decode())


@pytest.mark.parametrize("handle", ["\u00e9", "not base64", ""])
def test_task_handles_that_are_not_base64_are_invalid(handle: str) -> None:
    with pytest.raises(InvalidParameterValue, match=_INVALID_HANDLE):
        _read_task_handle(handle)


def test_a_task_handle_we_issued_reads_back() -> None:
    assert _read_task_handle(_task_handle("task-1", DLQ)) == ("task-1", DLQ)
