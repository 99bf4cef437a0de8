"""Parsing requests: what botocore serialises, in either protocol, comes back as the same JSON-shaped params."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from botocore.model import ServiceModel
from botocore.serialize import create_serializer
from botocore.utils import percent_encode_sequence

from ferrymq.errors import (
    InvalidAction,
    InvalidParameterValue,
    MissingParameter,
    SerializationError,
    UnknownOperation,
    UnsupportedProtocol,
)
from ferrymq.protocol.requests import SqsRequest, parse_request, response_protocol
from tests.unit.protocol.samples import QUEUE_URL, REQUESTS

_IDS = [f"{action}-{i}" for i, (action, _) in enumerate(REQUESTS)]


def _lower(headers: dict[str, Any]) -> dict[str, str]:
    return {k.lower(): str(v) for k, v in headers.items()}


def _json_request(action: str, body: bytes | str, **headers: str) -> SqsRequest:
    raw = body.encode() if isinstance(body, str) else body
    all_headers = {"content-type": "application/x-amz-json-1.0", "x-amz-target": f"AmazonSQS.{action}", **headers}
    return parse_request("POST", "/", "", all_headers, raw)


def _form_request(params: dict[str, str], path: str = "/") -> SqsRequest:
    body = urlencode(params).encode()
    return parse_request("POST", path, "", {"content-type": "application/x-www-form-urlencoded"}, body)


# --- round trips through botocore's serialisers ------------------------------------------------------


@pytest.mark.parametrize(("action", "params"), REQUESTS, ids=_IDS)
def test_json_request_serialised_by_botocore_parses_back(json_model: ServiceModel, action: str,
                                                          params: dict[str, Any]) -> None:
    # given a request botocore serialises for the JSON protocol
    wire = create_serializer("json").serialize_to_request(params, json_model.operation_model(action))
    # when it is parsed
    parsed = parse_request(wire["method"], wire["url_path"], "", _lower(wire["headers"]), wire["body"])
    # then the action and the params are what the client passed
    assert (parsed.action, parsed.protocol, parsed.path_queue_url_path) == (action, "json", None)
    assert parsed.params == params


@pytest.mark.parametrize(("action", "params"), REQUESTS, ids=_IDS)
def test_query_request_serialised_by_botocore_parses_back(query_model: ServiceModel, action: str,
                                                           params: dict[str, Any]) -> None:
    # given a request botocore serialises for the query protocol, form-encoded the way it sends it
    wire = create_serializer("query").serialize_to_request(params, query_model.operation_model(action))
    body = percent_encode_sequence(wire["body"]).encode()
    headers = {"content-type": "application/x-www-form-urlencoded; charset=utf-8"}
    # when it is parsed
    parsed = parse_request("POST", "/", "", headers, body)
    # then the flattened parameters come back in the JSON shape
    assert (parsed.action, parsed.protocol) == (action, "query")
    assert parsed.params == params


@pytest.mark.parametrize(("action", "params"), REQUESTS, ids=_IDS)
def test_query_request_sent_as_get_parses_like_post(query_model: ServiceModel, action: str,
                                                    params: dict[str, Any]) -> None:
    wire = create_serializer("query").serialize_to_request(params, query_model.operation_model(action))
    parsed = parse_request("GET", "/", percent_encode_sequence(wire["body"]), {}, b"")
    assert parsed.params == params


# --- the query protocol's own forms ------------------------------------------------------------------


def test_query_system_attribute_names_use_the_documented_flattened_name() -> None:
    # given ReceiveMessage naming system attributes the query way (the member is younger than the query model)
    request = _form_request({"Action": "ReceiveMessage", "QueueUrl": QUEUE_URL,
                             "MessageSystemAttributeName.2": "SenderId", "MessageSystemAttributeName.1": "All"})
    # then they arrive as a list in index order
    assert request.params["MessageSystemAttributeNames"] == ["All", "SenderId"]


def test_query_path_names_the_queue_when_no_queue_url_is_given() -> None:
    # given a query request posted to the queue URL's path
    request = _form_request({"Action": "SendMessage", "MessageBody": "b"}, path="/000000000000/my%2Dq")
    # then the path is offered to the handler, decoded, and no QueueUrl is invented
    assert request.path_queue_url_path == "/000000000000/my-q"
    assert request.params == {"MessageBody": "b"}


def test_query_root_path_names_no_queue() -> None:
    assert _form_request({"Action": "ListQueues"}).path_queue_url_path is None


def test_query_params_combine_the_url_and_the_form_body() -> None:
    body = b"MessageBody=from%20body"
    request = parse_request("POST", "/000000000000/q", "Action=SendMessage&DelaySeconds=3",
                            {"content-type": "application/x-www-form-urlencoded"}, body)
    assert request.params == {"MessageBody": "from body", "DelaySeconds": 3}


def test_query_plus_decodes_to_space_and_percent_escapes_to_utf8() -> None:
    request = _form_request({"Action": "SendMessage", "QueueUrl": QUEUE_URL, "MessageBody": "a b+\u00e9"})
    assert request.params["MessageBody"] == "a b+\u00e9"


def test_query_ignores_signature_and_unknown_parameters() -> None:
    request = parse_request("GET", "/", "Action=ListQueues&Version=2012-11-05&X-Amz-Date=x&Bogus.1=2", {}, b"")
    assert request.params == {}


def test_query_bare_list_value_is_a_list_of_one() -> None:
    request = _form_request({"Action": "GetQueueAttributes", "QueueUrl": QUEUE_URL, "AttributeName": "All"})
    assert request.params["AttributeNames"] == ["All"]


def test_query_list_indexes_need_not_be_contiguous() -> None:
    request = _form_request({"Action": "UntagQueue", "QueueUrl": QUEUE_URL, "TagKey.10": "c", "TagKey.2": "b"})
    assert request.params["TagKeys"] == ["b", "c"]


@pytest.mark.parametrize("value", ["abc", "1.5", "", " 5", "1_000", "\u0661", "99999999999"])
def test_query_integer_that_is_not_one_is_an_invalid_parameter_value(value: str) -> None:
    # given a query-protocol integer that is not an integer
    params = {"Action": "ReceiveMessage", "QueueUrl": QUEUE_URL, "MaxNumberOfMessages": value}
    # when parsed, then SQS's InvalidParameterValue names the value and the parameter
    with pytest.raises(InvalidParameterValue) as caught:
        _form_request(params)
    expected = f"Value {value} for parameter MaxNumberOfMessages is invalid. Reason: Must be an integer."
    assert caught.value.message == expected


def test_query_nested_integer_error_names_the_full_parameter() -> None:
    params = {"Action": "SendMessageBatch", "QueueUrl": QUEUE_URL, "SendMessageBatchRequestEntry.1.Id": "a",
              "SendMessageBatchRequestEntry.1.MessageBody": "b", "SendMessageBatchRequestEntry.1.DelaySeconds": "x"}
    with pytest.raises(InvalidParameterValue, match=re.escape("parameter SendMessageBatchRequestEntry.1.DelaySeconds")):
        _form_request(params)


def test_query_binary_that_is_not_base64_is_an_invalid_parameter_value() -> None:
    params = {"Action": "SendMessage", "QueueUrl": QUEUE_URL, "MessageBody": "b",
              "MessageAttribute.1.Name": "a", "MessageAttribute.1.Value.DataType": "Binary",
              "MessageAttribute.1.Value.BinaryValue": "not base64!"}
    with pytest.raises(InvalidParameterValue, match=re.escape("MessageAttribute.1.Value.BinaryValue")):
        _form_request(params)


def test_query_unknown_action_is_invalid() -> None:
    with pytest.raises(InvalidAction) as caught:
        parse_request("GET", "/", "Action=Frobnicate", {}, b"")
    assert caught.value.message == "The action Frobnicate is not valid for this endpoint."


def test_query_get_of_a_queue_url_without_action_is_an_unknown_operation() -> None:
    # AWS answers a GET of a queue URL naming no action with a 404 UnknownOperationException
    with pytest.raises(UnknownOperation) as caught:
        parse_request("GET", "/000000000000/jobs", "", {}, b"")
    assert (caught.value.status, caught.value.code) == (404, "UnknownOperationException")


@pytest.mark.parametrize("path", ["/", ""])
def test_query_get_of_the_endpoint_without_action_is_an_unknown_operation(path: str) -> None:
    with pytest.raises(UnknownOperation):
        parse_request("GET", path, "Version=2012-11-05", {}, b"")


def test_query_post_without_action_is_a_missing_parameter() -> None:
    with pytest.raises(MissingParameter) as caught:
        parse_request("POST", "/", "", {"content-type": "application/x-www-form-urlencoded"}, b"Version=2012-11-05")
    assert caught.value.message == "The request must contain the parameter Action."


@pytest.mark.parametrize("action", ["CreateQueue", "ListQueues"])
def test_query_actions_about_no_queue_sent_to_a_queue_url_are_invalid(action: str) -> None:
    with pytest.raises(InvalidAction) as caught:
        parse_request("POST", "/000000000000/jobs", "", {"content-type": "application/x-www-form-urlencoded"},
                      f"Action={action}&QueueName=x".encode())
    assert (caught.value.status, caught.value.message) == (400, f"The action {action} is not valid for this endpoint.")
    # at the root they are fine
    assert parse_request("GET", "/", f"Action={action}&QueueName=x", {}, b"").action == action


@pytest.mark.parametrize(
    ("protocol", "accept", "answer"),
    [("query", "application/json", "query_json"), ("query", "text/html, application/json;q=0.9", "query_json"),
     ("query", "", "query"), ("query", "*/*", "query"), ("json", "", "json"), ("json", "application/json", "json")],
)
def test_a_query_request_accepting_json_gets_the_json_form_of_the_query_protocol(protocol: str, accept: str,
                                                                                 answer: str) -> None:
    assert response_protocol(protocol, {"accept": accept} if accept else {}) == answer


def test_query_post_body_that_is_not_a_form_is_refused() -> None:
    with pytest.raises(UnsupportedProtocol):
        parse_request("POST", "/", "", {"content-type": "text/plain"}, b"Action=ListQueues")


def test_query_parameters_that_are_not_utf8_are_invalid() -> None:
    with pytest.raises(InvalidParameterValue):
        parse_request("GET", "/", "Action=SendMessage&MessageBody=%ff%fe", {}, b"")


# --- the JSON protocol's own checks ------------------------------------------------------------------


def test_json_binary_attribute_arrives_as_bytes() -> None:
    body = ('{"QueueUrl": "u", "MessageBody": "b", "MessageAttributes": {"a": {"DataType": "Binary", '
            '"BinaryValue": "AAH+/w=="}}}')
    request = _json_request("SendMessage", body)
    assert request.params["MessageAttributes"]["a"]["BinaryValue"] == b"\x00\x01\xfe\xff"


def test_json_nulls_and_unknown_members_are_dropped() -> None:
    request = _json_request("SendMessage", '{"QueueUrl": "u", "MessageBody": "b", "DelaySeconds": null, "X": 1}')
    assert request.params == {"QueueUrl": "u", "MessageBody": "b"}


@pytest.mark.parametrize("body", [b"", b"  ", b"null"])
def test_json_empty_body_is_an_empty_input(body: bytes) -> None:
    assert _json_request("ListQueues", body).params == {}


def test_json_content_type_is_matched_without_regard_to_case() -> None:
    headers = {"content-type": "Application/X-Amz-Json-1.0", "x-amz-target": "AmazonSQS.ListQueues"}
    assert parse_request("POST", "/", "", headers, b"{}").protocol == "json"


def test_json_target_names_the_action() -> None:
    request = _json_request("GetQueueUrl", '{"QueueName": "q"}')
    assert (request.action, request.params) == ("GetQueueUrl", {"QueueName": "q"})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"QueueUrl": "u", "MessageBody": "b", "DelaySeconds": "5"}',
         "STRING_VALUE can not be converted to an Integer"),
        ('{"QueueUrl": 5, "MessageBody": "b"}', "NUMBER_VALUE can not be converted to a String"),
        ('{"QueueUrl": true, "MessageBody": "b"}', "BOOLEAN_VALUE can not be converted to a String"),
        ('{"QueueUrl": {"a": 1}, "MessageBody": "b"}', "Start of structure or map found where not expected."),
        ('{"QueueUrl": ["u"], "MessageBody": "b"}', "Start of list found where not expected."),
        ('{"QueueUrl": "u", "MessageBody": "b", "DelaySeconds": 1.5}',
         "NUMBER_VALUE can not be converted to an Integer"),
        ('{"QueueUrl": "u", "MessageBody": "b", "MessageAttributes": []}', "Start of list found where not expected."),
        ('{"QueueUrl": "u", "MessageBody": "b", "MessageAttributes": {"a": "x"}}',
         "STRING_VALUE found where a structure or map was expected."),
        ('[]', "Start of list found where not expected."),
    ],
)
def test_json_wrong_types_are_serialization_errors(body: str, message: str) -> None:
    # given a JSON value of the wrong type for its member
    # when parsed, then SQS's SerializationException says what it could not convert
    with pytest.raises(SerializationError) as caught:
        _json_request("SendMessage", body)
    assert caught.value.message == message


def test_json_integer_out_of_range_is_a_serialization_error() -> None:
    with pytest.raises(SerializationError):
        _json_request("SendMessage", '{"QueueUrl": "u", "MessageBody": "b", "DelaySeconds": 4294967296}')


def test_json_integral_float_is_accepted_as_an_integer() -> None:
    assert _json_request("ReceiveMessage", '{"QueueUrl": "u", "WaitTimeSeconds": 20.0}').params["WaitTimeSeconds"] == 20


def test_json_bad_base64_is_a_serialization_error() -> None:
    body = ('{"QueueUrl": "u", "MessageBody": "b", "MessageAttributes": {"a": {"DataType": "Binary", '
            '"BinaryValue": "***"}}}')
    with pytest.raises(SerializationError):
        _json_request("SendMessage", body)


def test_json_that_does_not_parse_is_a_serialization_error() -> None:
    with pytest.raises(SerializationError):
        _json_request("SendMessage", '{"QueueUrl": ')


def test_json_unknown_action_is_invalid() -> None:
    with pytest.raises(InvalidAction, match=re.escape("The action Frobnicate is not valid for this endpoint.")):
        _json_request("Frobnicate", "{}")


def test_json_target_of_another_service_is_invalid() -> None:
    headers = {"content-type": "application/x-amz-json-1.0", "x-amz-target": "DynamoDB_20120810.ListTables"}
    with pytest.raises(InvalidAction, match=re.escape("DynamoDB_20120810.ListTables")):
        parse_request("POST", "/", "", headers, b"{}")


def test_json_without_target_is_refused() -> None:
    with pytest.raises(UnsupportedProtocol):
        parse_request("POST", "/", "", {"content-type": "application/x-amz-json-1.0"}, b"{}")


def test_json_1_1_is_refused() -> None:
    with pytest.raises(UnsupportedProtocol):
        _json_request("ListQueues", "{}", **{"content-type": "application/x-amz-json-1.1"})


def test_json_queue_path_is_not_offered() -> None:
    headers = {"content-type": "application/x-amz-json-1.0", "x-amz-target": "AmazonSQS.ListQueues"}
    assert parse_request("POST", f"/000000000000/{quote('q')}", "", headers, b"{}").path_queue_url_path is None
