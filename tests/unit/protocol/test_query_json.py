"""The JSON form of query-protocol responses (a query request that accepts application/json)."""

from __future__ import annotations

import orjson
import pytest

from ferrymq import errors
from ferrymq.protocol.responses import render_error, render_result
from tests.unit.protocol.samples import RESULTS


def test_list_queues_is_the_query_response_tree_as_json() -> None:
    response = render_result("query_json", "ListQueues", {"QueueUrls": ["u1", "u2"]}, "rid")
    assert response.status == 200 and dict(response.headers)["content-type"] == "application/json"
    assert orjson.loads(response.body) == {
        "ListQueuesResponse": {"ListQueuesResult": {"QueueUrls": ["u1", "u2"]},
                               "ResponseMetadata": {"RequestId": "rid"}}
    }


def test_maps_are_lists_of_entries_and_binary_values_base64() -> None:
    result = {"Messages": [{"MessageId": "m", "Body": "b", "Attributes": {"SenderId": "s"},
                            "MessageAttributes": {"k": {"DataType": "Binary", "BinaryValue": b"\x00\x01"}}}]}
    body = orjson.loads(render_result("query_json", "ReceiveMessage", result, "rid").body)
    message = body["ReceiveMessageResponse"]["ReceiveMessageResult"]["Messages"][0]
    assert message["Attributes"] == [{"Name": "SenderId", "Value": "s"}]
    assert message["MessageAttributes"] == [{"Name": "k", "Value": {"DataType": "Binary", "BinaryValue": "AAE="}}]


def test_an_action_without_output_has_only_its_metadata() -> None:
    body = orjson.loads(render_result("query_json", "DeleteQueue", {}, "rid").body)
    assert body == {"DeleteQueueResponse": {"ResponseMetadata": {"RequestId": "rid"}}}


@pytest.mark.parametrize(("action", "result"), RESULTS)
def test_every_sample_result_renders(action: str, result: dict) -> None:
    body = orjson.loads(render_result("query_json", action, result, "rid").body)
    assert list(body) == [f"{action}Response"]


def test_errors_carry_the_query_code_type_and_message() -> None:
    response = render_error("query_json", errors.QueueDoesNotExist(), "rid")
    assert response.status == 400 and dict(response.headers)["content-type"] == "application/json"
    assert orjson.loads(response.body) == {
        "Error": {"Type": "Sender", "Code": "AWS.SimpleQueueService.NonExistentQueue",
                  "Message": "The specified queue does not exist."},
        "RequestId": "rid",
    }


def test_an_unexpected_error_shows_no_internals() -> None:
    body = orjson.loads(render_error("query_json", RuntimeError("secret path /x"), "rid").body)
    assert body["Error"]["Code"] == "InternalFailure" and "secret" not in body["Error"]["Message"]


@pytest.mark.parametrize("protocol", ["json", "query", "query_json"])
def test_an_unknown_operation_is_the_bare_xml_element_in_every_protocol(protocol: str) -> None:
    response = render_error(protocol, errors.UnknownOperation(), "rid")
    assert (response.status, response.body) == (404, b"<UnknownOperationException/>")
    assert dict(response.headers)["content-type"] == "text/xml"
