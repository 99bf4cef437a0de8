"""Rendering results and errors, checked byte by byte where SQS's format is known and through botocore's own
response parsers for both protocols."""

from __future__ import annotations

import copy
from typing import Any
from xml.etree import ElementTree

import orjson
import pytest
from botocore.awsrequest import HeadersDict
from botocore.model import ServiceModel
from botocore.parsers import create_parser

from ferrymq import errors
from ferrymq.protocol.responses import HttpResponse, render_error, render_result
from tests.unit.protocol.samples import QUEUE_URL, RESULTS, TRICKY_TEXT

_IDS = [f"{action}-{i}" for i, (action, _) in enumerate(RESULTS)]
REQUEST_ID = "5f8b4c1e-0000-4000-8000-000000000001"


def _botocore_parse(protocol: str, model: ServiceModel, action: str, response: HttpResponse) -> dict[str, Any]:
    operation = model.operation_model(action)
    wire = {"status_code": response.status, "headers": HeadersDict(response.headers), "body": response.body}
    return create_parser(protocol).parse(wire, operation.output_shape)


def _without_empty_collections(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_empty_collections(v) for k, v in value.items() if v != [] and v != {}}
    if isinstance(value, list):
        return [_without_empty_collections(v) for v in value]
    return value


# --- results -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("action", "result"), RESULTS, ids=_IDS)
def test_json_result_parses_back_in_botocore(json_model: ServiceModel, action: str, result: dict[str, Any]) -> None:
    # given a handler's result
    # when it is rendered for the JSON protocol and botocore parses the response
    response = render_result("json", action, copy.deepcopy(result), REQUEST_ID)
    parsed = _botocore_parse("json", json_model, action, response)
    # then the client sees exactly that result and our request id (an empty Failed left out, as AWS does)
    assert response.status == 200
    assert parsed.pop("ResponseMetadata")["RequestId"] == REQUEST_ID
    expected = {k: v for k, v in result.items() if not (k == "Failed" and v == [])}
    assert parsed == expected


@pytest.mark.parametrize(("action", "result"), RESULTS, ids=_IDS)
def test_query_result_parses_back_in_botocore(query_model: ServiceModel, action: str, result: dict[str, Any]) -> None:
    # given a handler's result
    # when it is rendered for the query protocol and botocore's query parser reads the XML
    response = render_result("query", action, copy.deepcopy(result), REQUEST_ID)
    parsed = _botocore_parse("query", query_model, action, response)
    # then the client sees that result (XML has no empty lists) and our request id
    assert response.status == 200
    assert parsed.pop("ResponseMetadata")["RequestId"] == REQUEST_ID
    assert parsed == _without_empty_collections(result)


def test_json_result_headers_and_body() -> None:
    response = render_result("json", "CreateQueue", {"QueueUrl": QUEUE_URL}, REQUEST_ID)
    assert response.headers == [("content-type", "application/x-amz-json-1.0"), ("x-amzn-RequestId", REQUEST_ID)]
    assert orjson.loads(response.body) == {"QueueUrl": QUEUE_URL}


def test_query_result_is_sqs_xml() -> None:
    # given a CreateQueue result
    response = render_result("query", "CreateQueue", {"QueueUrl": QUEUE_URL}, REQUEST_ID)
    # then the XML is SQS's envelope with the result and the request id
    assert response.headers == [("content-type", "text/xml"), ("x-amzn-RequestId", REQUEST_ID)]
    assert response.body.decode() == (
        '<?xml version="1.0"?><CreateQueueResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/">'
        f"<CreateQueueResult><QueueUrl>{QUEUE_URL}</QueueUrl></CreateQueueResult>"
        f"<ResponseMetadata><RequestId>{REQUEST_ID}</RequestId></ResponseMetadata></CreateQueueResponse>"
    )


def test_query_action_without_output_still_has_response_metadata() -> None:
    body = render_result("query", "DeleteMessage", {}, REQUEST_ID).body.decode()
    assert body == (
        '<?xml version="1.0"?><DeleteMessageResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/">'
        f"<ResponseMetadata><RequestId>{REQUEST_ID}</RequestId></ResponseMetadata></DeleteMessageResponse>"
    )


def test_json_action_without_output_is_an_empty_object() -> None:
    assert render_result("json", "DeleteMessage", {}, REQUEST_ID).body == b"{}"


def test_query_lists_and_maps_use_legacy_names() -> None:
    # given a received message with system and message attributes
    result = {"Messages": [{"MessageId": "m", "Body": "b", "Attributes": {"SenderId": "s"},
                            "MessageAttributes": {"k": {"StringValue": "v", "DataType": "String"}}}]}
    # then they are flattened under SQS's element names
    body = render_result("query", "ReceiveMessage", result, REQUEST_ID).body.decode()
    assert (
        "<ReceiveMessageResult><Message><MessageId>m</MessageId><Body>b</Body>"
        "<Attribute><Name>SenderId</Name><Value>s</Value></Attribute>"
        "<MessageAttribute><Name>k</Name><Value><StringValue>v</StringValue><DataType>String</DataType></Value>"
        "</MessageAttribute></Message></ReceiveMessageResult>"
    ) in body


def test_query_batch_entries_use_legacy_names() -> None:
    result = {"Successful": [{"Id": "a", "MessageId": "m", "MD5OfMessageBody": "x"}],
              "Failed": [{"Id": "b", "SenderFault": True, "Code": "C", "Message": "M"}]}
    body = render_result("query", "SendMessageBatch", result, REQUEST_ID).body.decode()
    assert ("<SendMessageBatchResultEntry><Id>a</Id><MessageId>m</MessageId><MD5OfMessageBody>x</MD5OfMessageBody>"
            "</SendMessageBatchResultEntry><BatchResultErrorEntry><Id>b</Id><SenderFault>true</SenderFault>"
            "<Code>C</Code><Message>M</Message></BatchResultErrorEntry>") in body


def test_query_list_queues_repeats_queue_url() -> None:
    body = render_result("query", "ListQueues", {"QueueUrls": ["a", "b"]}, REQUEST_ID).body.decode()
    assert "<ListQueuesResult><QueueUrl>a</QueueUrl><QueueUrl>b</QueueUrl></ListQueuesResult>" in body


def test_query_text_escapes_markup_and_carriage_returns() -> None:
    # given a body with markup characters and carriage returns
    result = {"Messages": [{"MessageId": "m", "Body": "<a href=\"x\">&'\r\n</a>\r"}]}
    # then they are escaped, CR as a character reference so XML parsing does not turn it into LF
    body = render_result("query", "ReceiveMessage", result, REQUEST_ID).body.decode()
    assert "<Body>&lt;a href=&quot;x&quot;&gt;&amp;&apos;&#xD;\n&lt;/a&gt;&#xD;</Body>" in body


def test_tricky_body_round_trips_through_both_parsers(json_model: ServiceModel, query_model: ServiceModel) -> None:
    result = {"Messages": [{"MessageId": "m", "Body": TRICKY_TEXT}]}
    for protocol, model in (("json", json_model), ("query", query_model)):
        parsed = _botocore_parse(protocol, model, "ReceiveMessage", render_result(protocol, "ReceiveMessage",
                                                                                  result, REQUEST_ID))
        assert parsed["Messages"][0]["Body"] == TRICKY_TEXT, protocol


def test_empty_receive_is_an_empty_object_in_json_and_an_empty_result_in_xml() -> None:
    assert render_result("json", "ReceiveMessage", {"Messages": []}, REQUEST_ID).body == b"{}"
    assert b"<ReceiveMessageResult/><ResponseMetadata>" in render_result("query", "ReceiveMessage", {},
                                                                         REQUEST_ID).body


def test_json_batch_keeps_required_empty_lists_and_drops_none() -> None:
    # given a batch result whose Failed list is empty and whose optional members are None
    result = {"Successful": [{"Id": "a", "MessageId": "m", "MD5OfMessageBody": "x", "SequenceNumber": None}],
              "Failed": []}
    # then JSON leaves the empty Failed and the None out, as AWS does
    assert orjson.loads(render_result("json", "SendMessageBatch", result, REQUEST_ID).body) == {
        "Successful": [{"Id": "a", "MessageId": "m", "MD5OfMessageBody": "x"}],
    }


def test_json_required_lists_are_written_even_when_the_handler_left_them_out_but_an_empty_failed() -> None:
    # AWS leaves an empty Failed out of JSON batch responses, and always writes Successful
    body = render_result("json", "DeleteMessageBatch", {"Successful": [{"Id": "1"}], "Failed": []}, REQUEST_ID).body
    assert orjson.loads(body) == {"Successful": [{"Id": "1"}]}
    body = render_result("json", "DeleteMessageBatch", {"Failed": [{"Id": "1", "SenderFault": True, "Code": "X",
                                                                   "Message": "m"}]}, REQUEST_ID).body
    assert orjson.loads(body) == {"Successful": [], "Failed": [{"Id": "1", "SenderFault": True, "Code": "X",
                                                                "Message": "m"}]}


def test_json_binary_values_are_base64() -> None:
    result = {"Messages": [{"MessageId": "m", "MessageAttributes": {
        "b": {"DataType": "Binary", "BinaryValue": b"\x00\xff", "StringListValues": []}}}]}
    body = orjson.loads(render_result("json", "ReceiveMessage", result, REQUEST_ID).body)
    assert body["Messages"][0]["MessageAttributes"]["b"] == {"DataType": "Binary", "BinaryValue": "AP8="}


def test_unknown_action_or_protocol_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        render_result("json", "Frobnicate", {}, REQUEST_ID)
    with pytest.raises(ValueError):
        render_result("soap", "ListQueues", {}, REQUEST_ID)


# --- errors ------------------------------------------------------------------------------------------


def test_json_error_is_the_documented_sqs_response() -> None:
    # given a queue that does not exist
    response = render_error("json", errors.QueueDoesNotExist(), REQUEST_ID)
    # then the response matches SQS's documented JSON error
    assert response.status == 400
    assert response.headers == [
        ("content-type", "application/x-amz-json-1.0"),
        ("x-amzn-RequestId", REQUEST_ID),
        ("x-amzn-query-error", "AWS.SimpleQueueService.NonExistentQueue;Sender"),
    ]
    assert orjson.loads(response.body) == {
        "__type": "com.amazonaws.sqs#QueueDoesNotExist",
        "message": "The specified queue does not exist.",
    }


def test_query_error_is_the_sqs_error_response() -> None:
    response = render_error("query", errors.QueueDoesNotExist(), REQUEST_ID)
    assert response.status == 400
    assert response.headers == [("content-type", "text/xml"), ("x-amzn-RequestId", REQUEST_ID)]
    assert response.body.decode() == (
        '<?xml version="1.0"?><ErrorResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><Error>'
        "<Type>Sender</Type><Code>AWS.SimpleQueueService.NonExistentQueue</Code>"
        "<Message>The specified queue does not exist for this wsdl version.</Message><Detail/></Error>"
        f"<RequestId>{REQUEST_ID}</RequestId></ErrorResponse>"
    )


def test_query_error_keeps_a_specific_message() -> None:
    body = render_error("query", errors.QueueDoesNotExist("The queue q went away."), REQUEST_ID).body.decode()
    assert "<Message>The queue q went away.</Message>" in body


@pytest.mark.parametrize(
    ("error", "json_type", "query_code", "status"),
    [
        (errors.InvalidParameterValue("Value 11 for parameter MaxNumberOfMessages is invalid."),
         "com.amazonaws.sqs#InvalidParameterValueException", "InvalidParameterValue", 400),
        (errors.MissingParameter("The request must contain the parameter MessageGroupId."),
         "com.amazonaws.sqs#MissingRequiredParameterException", "MissingParameter", 400),
        (errors.QueueNameExists(), "com.amazonaws.sqs#QueueNameExists", "QueueAlreadyExists", 400),
        (errors.PurgeQueueInProgress("Only one PurgeQueue operation on q is allowed every 60 seconds."),
         "com.amazonaws.sqs#PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress", 403),
        (errors.BatchRequestTooLong("too long"), "com.amazonaws.sqs#BatchRequestTooLong",
         "AWS.SimpleQueueService.BatchRequestTooLong", 400),
        (errors.InvalidAttributeName("Unknown Attribute FifoQueue."), "com.amazonaws.sqs#InvalidAttributeName",
         "InvalidAttributeName", 400),
        (errors.SignatureDoesNotMatch("Signature expired"), "com.amazon.coral.service#SignatureDoesNotMatch",
         "SignatureDoesNotMatch", 403),
    ],
)
def test_errors_carry_the_codes_sqs_sends(json_model: ServiceModel, query_model: ServiceModel,
                                          error: errors.SqsError, json_type: str, query_code: str,
                                          status: int) -> None:
    # given an error whose codes are recorded from SQS
    json_response = render_error("json", error, REQUEST_ID)
    query_response = render_error("query", error, REQUEST_ID)
    # then the JSON body carries SQS's type and botocore reports the query code on both protocols
    assert orjson.loads(json_response.body)["__type"] == json_type
    from_json = _botocore_parse("json", json_model, "SendMessage", json_response)["Error"]
    from_query = _botocore_parse("query", query_model, "SendMessage", query_response)["Error"]
    assert (from_json["Code"], from_json["QueryErrorCode"], from_json["Message"]) == (
        query_code, json_type.split("#")[1], error.message)
    assert (from_query["Code"], from_query["Message"]) == (query_code, error.message)
    assert json_response.status == query_response.status == status


def _error_classes() -> list[type[errors.SqsError]]:
    found: list[type[errors.SqsError]] = []
    pending = [errors.SqsError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if not cls.__name__.startswith("_") and cls not in (errors.SqsError, errors.SenderError):
            found.append(cls)
    return sorted(set(found), key=lambda c: c.__name__)


# UnknownOperation is SQS's bare <UnknownOperationException/> (tests/unit/protocol/test_query_json.py): it answers
# a GET naming no action, which no SDK sends.
@pytest.mark.parametrize("cls", [c for c in _error_classes() if c is not errors.UnknownOperation],
                         ids=lambda c: c.__name__)
def test_every_error_class_renders_in_both_protocols(json_model: ServiceModel, query_model: ServiceModel,
                                                     cls: type[errors.SqsError]) -> None:
    # given any error of the hierarchy, with markup in its message
    error = cls("bad <input> & more")
    # when rendered for each protocol and parsed by botocore
    for protocol, model in (("json", json_model), ("query", query_model)):
        response = render_error(protocol, error, REQUEST_ID)
        parsed = _botocore_parse(protocol, model, "SendMessage", response)
        # then the client sees the query code, the fault side, the message and the request id
        assert response.status == cls.status
        assert parsed["Error"]["Code"] == cls.query_code, protocol
        assert parsed["Error"]["Type"] == ("Sender" if cls.sender else "Receiver"), protocol
        assert parsed["Error"]["Message"] == "bad <input> & more", protocol
        assert parsed["ResponseMetadata"]["RequestId"] == REQUEST_ID, protocol


def test_unexpected_exceptions_render_as_internal_error_without_details() -> None:
    # given an exception that is not an SqsError, carrying internals
    leak = RuntimeError("db password hunter2")
    # when rendered for each protocol
    json_response = render_error("json", leak, REQUEST_ID)
    query_response = render_error("query", leak, REQUEST_ID)
    # then it is an InternalFailure on the receiver's side with the generic message only
    generic = "The request processing has failed because of an unknown error, exception or failure."
    assert json_response.status == query_response.status == 500
    assert ("x-amzn-query-error", "InternalFailure;Receiver") in json_response.headers
    assert orjson.loads(json_response.body) == {
        "__type": "com.amazon.coral.service#InternalFailure",
        "message": generic,
    }
    assert (f"<Type>Receiver</Type><Code>InternalFailure</Code><Message>{generic}</Message>"
            in query_response.body.decode())
    assert b"hunter2" not in json_response.body + query_response.body


@pytest.mark.parametrize(("text", "written"), [("\x1f", "\ufffd"), ("\x00", "\ufffd"), ("a\x0bb", "a\ufffdb"),
                                             ("\ud800", "\ufffd"), ("\ufffe\uffff", "\ufffd\ufffd")])
def test_query_text_xml_cannot_hold_is_written_as_the_replacement_character(text: str, written: str) -> None:
    # given a batch entry's error echoing what a client sent, holding a character no XML document may hold
    result = {"Successful": [], "Failed": [{"Id": "b", "SenderFault": True, "Code": "ReceiptHandleIsInvalid",
                                            "Message": f'The input receipt handle "{text}" is not valid.'}]}
    body = render_result("query", "ChangeMessageVisibilityBatch", result, REQUEST_ID).body
    # then the document is well formed, the character replaced and the markup around it still escaped
    ElementTree.fromstring(body)
    assert f"<Message>The input receipt handle &quot;{written}&quot; is not valid.</Message>".encode() in body
