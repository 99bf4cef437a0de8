"""Parsing requests no SDK sends: each either parses to what the query/JSON rules make of it or is refused with
SQS's error, never an exception of another kind."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from ferrymq.errors import InvalidParameterValue, SerializationError
from ferrymq.protocol.requests import SqsRequest, parse_request
from tests.unit.protocol.samples import QUEUE_URL

HUGE = "1" * 4301


def _form(pairs: list[tuple[str, str]]) -> SqsRequest:
    body = urlencode(pairs).encode()
    return parse_request("POST", "/", "", {"content-type": "application/x-www-form-urlencoded"}, body)


def _json(action: str, document: object) -> SqsRequest:
    headers = {"content-type": "application/x-amz-json-1.0", "x-amz-target": f"AmazonSQS.{action}"}
    return parse_request("POST", "/", "", headers, json.dumps(document).encode())


@pytest.mark.parametrize("index", ["\u00b2", "\u0663", "\uff11", "x", "-1", ""])
def test_a_list_index_that_is_not_ascii_digits_names_no_item(index: str) -> None:
    request = _form([("Action", "GetQueueAttributes"), ("QueueUrl", QUEUE_URL), (f"AttributeName.{index}", "All")])
    assert "AttributeNames" not in request.params


def test_list_indexes_of_thousands_of_digits_keep_their_order() -> None:
    request = _form([("Action", "UntagQueue"), ("QueueUrl", QUEUE_URL), (f"TagKey.{HUGE}", "last"),
                     ("TagKey.2", "first")])
    assert request.params["TagKeys"] == ["first", "last"]


def test_a_list_item_with_sub_parameters_but_no_value_is_dropped() -> None:
    request = _form([("Action", "AddPermission"), ("QueueUrl", QUEUE_URL), ("AWSAccountId.1.x", "1"),
                     ("AWSAccountId.2", "111111111111")])
    assert request.params["AWSAccountIds"] == ["111111111111"]


def test_a_list_whose_only_item_has_no_value_is_not_given() -> None:
    request = _form([("Action", "AddPermission"), ("QueueUrl", QUEUE_URL), ("AWSAccountId.1.x", "1")])
    assert "AWSAccountIds" not in request.params


def test_an_explicitly_empty_list_is_still_empty() -> None:
    request = _form([("Action", "GetQueueAttributes"), ("QueueUrl", QUEUE_URL), ("AttributeNames", "")])
    assert request.params["AttributeNames"] == []


@pytest.mark.parametrize("value", [HUGE, "-" + HUGE, "0" * 5000 + "1" * 20])
def test_a_query_integer_of_thousands_of_digits_is_an_invalid_parameter_value(value: str) -> None:
    with pytest.raises(InvalidParameterValue) as caught:
        _form([("Action", "ReceiveMessage"), ("QueueUrl", QUEUE_URL), ("MaxNumberOfMessages", value)])
    assert caught.value.message == (f"Value {value} for parameter MaxNumberOfMessages is invalid. "
                                    "Reason: Must be an integer.")


def test_leading_zeros_do_not_make_a_query_integer_too_long() -> None:
    request = _form([("Action", "ReceiveMessage"), ("QueueUrl", QUEUE_URL),
                     ("MaxNumberOfMessages", "0" * 50 + "7")])
    assert request.params["MaxNumberOfMessages"] == 7


def test_a_non_ascii_query_binary_value_is_an_invalid_parameter_value() -> None:
    with pytest.raises(InvalidParameterValue) as caught:
        _form([("Action", "SendMessage"), ("QueueUrl", QUEUE_URL), ("MessageBody", "b"),
               ("MessageAttribute.1.Name", "a"), ("MessageAttribute.1.Value.DataType", "Binary"),
               ("MessageAttribute.1.Value.BinaryValue", "\u00e9")])
    assert caught.value.message == ("Value \u00e9 for parameter MessageAttribute.1.Value.BinaryValue is invalid. "
                                    "Reason: Must be base64-encoded binary.")


def test_a_non_ascii_json_binary_value_is_a_serialization_error() -> None:
    document = {"QueueUrl": QUEUE_URL, "MessageBody": "b",
                "MessageAttributes": {"a": {"DataType": "Binary", "BinaryValue": "\u00e9"}}}
    with pytest.raises(SerializationError) as caught:
        _json("SendMessage", document)
    assert caught.value.message == "Base64 encoded binary value is not valid."
