"""The inputs that once made the front end answer 500, sent over HTTP as a client sends them: each now gets
the answer SQS gives, in the request's own protocol."""

from __future__ import annotations

import base64
import json
from urllib.parse import urlencode

import pytest

from tests.fuzz.answers import SqsAnswer, check_answer, read_error
from tests.fuzz.conftest import Answer, FuzzQueues, SignedClient
from tests.fuzz.strategies import HUGE_DIGITS

DEEP = 3000  # far past Python's recursion limit
_NESTED = "[" * DEEP + "]" * DEEP


def _query(signed: SignedClient, pairs: list[tuple[str, str]]) -> Answer:
    return signed.form(urlencode(pairs).encode())


def _json(signed: SignedClient, action: str, body: str) -> Answer:
    return signed.json(action, body.encode())


def _refused(protocol: str, answer: Answer) -> SqsAnswer:
    return read_error(protocol, answer.status, answer.headers, answer.body)


# --- 1. list indexes in other scripts' digits -----------------------------------------------------------


@pytest.mark.parametrize("index", ["\u00b2", "\u0663", "\uff11"])
def test_an_index_of_non_ascii_digits_names_no_list_item(signed: SignedClient, fuzz_queues: FuzzQueues,
                                                         index: str) -> None:
    # given GetQueueAttributes whose only attribute name sits under "AttributeName.²"
    answer = _query(signed, [("Action", "GetQueueAttributes"), ("QueueUrl", fuzz_queues.standard),
                             (f"AttributeName.{index}", "All")])
    # then, like any parameter that names no member, it is ignored: no attribute is asked for, none returned
    assert answer.status == 200, answer.body
    check_answer("query", answer.status, answer.headers, answer.body)
    assert b"<Attribute>" not in answer.body


# --- 2. numbers past Python's int-string limit ------------------------------------------------------------


def test_an_index_of_thousands_of_digits_is_an_ordinary_index(signed: SignedClient, fuzz_queues: FuzzQueues) -> None:
    answer = _query(signed, [("Action", "GetQueueAttributes"), ("QueueUrl", fuzz_queues.standard),
                             (f"AttributeName.{HUGE_DIGITS}", "QueueArn")])
    assert answer.status == 200, answer.body
    assert b"<Name>QueueArn</Name>" in answer.body


def test_an_integer_of_thousands_of_digits_is_an_invalid_parameter_value(signed: SignedClient,
                                                                         fuzz_queues: FuzzQueues) -> None:
    answer = _query(signed, [("Action", "ReceiveMessage"), ("QueueUrl", fuzz_queues.standard),
                             ("MaxNumberOfMessages", HUGE_DIGITS)])
    error = _refused("query", answer)
    assert (error.status, error.code) == (400, "InvalidParameterValue")
    assert error.message == (f"Value {HUGE_DIGITS} for parameter MaxNumberOfMessages is invalid. "
                             "Reason: Must be an integer.")


def test_a_json_number_of_thousands_of_digits_is_a_serialization_error(signed: SignedClient,
                                                                       fuzz_queues: FuzzQueues) -> None:
    body = f'{{"QueueUrl":"{fuzz_queues.standard}","MaxNumberOfMessages":{HUGE_DIGITS}}}'
    error = _refused("json", _json(signed, "ReceiveMessage", body))
    assert (error.status, error.code, error.json_type) == (
        400, "SerializationException", "com.amazon.coral.service#SerializationException")
    assert error.message == "The request body is not valid JSON."


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_an_attribute_of_thousands_of_digits_is_an_invalid_attribute_value(signed: SignedClient,
                                                                           fuzz_queues: FuzzQueues,
                                                                           protocol: str) -> None:
    answer = _set_attribute(signed, fuzz_queues, protocol, "VisibilityTimeout", HUGE_DIGITS)
    error = _refused(protocol, answer)
    assert (error.status, error.code) == (400, "InvalidAttributeValue")
    assert error.message == "Invalid value for the parameter VisibilityTimeout."


# --- 3. a BinaryValue that is not ASCII ---------------------------------------------------------------


def test_a_non_ascii_binary_value_is_an_invalid_parameter_value_on_the_query_protocol(
    signed: SignedClient, fuzz_queues: FuzzQueues
) -> None:
    answer = _query(signed, [("Action", "SendMessage"), ("QueueUrl", fuzz_queues.standard), ("MessageBody", "b"),
                             ("MessageAttribute.1.Name", "a"), ("MessageAttribute.1.Value.DataType", "Binary"),
                             ("MessageAttribute.1.Value.BinaryValue", "\u00e9t\u00e9")])
    error = _refused("query", answer)
    assert (error.status, error.code) == (400, "InvalidParameterValue")
    assert error.message == ("Value \u00e9t\u00e9 for parameter MessageAttribute.1.Value.BinaryValue is invalid. "
                             "Reason: Must be base64-encoded binary.")


def test_a_non_ascii_binary_value_is_a_serialization_error_on_the_json_protocol(
    signed: SignedClient, fuzz_queues: FuzzQueues
) -> None:
    body = json.dumps({"QueueUrl": fuzz_queues.standard, "MessageBody": "b",
                       "MessageAttributes": {"a": {"DataType": "Binary", "BinaryValue": "\u00e9t\u00e9"}}})
    error = _refused("json", _json(signed, "SendMessage", body))
    assert (error.status, error.code) == (400, "SerializationException")
    assert error.message == "Base64 encoded binary value is not valid."


# --- 4. and 5. JSON documents nested past the recursion limit, a maxReceiveCount past the int limit -----


def _set_attribute(signed: SignedClient, queues: FuzzQueues, protocol: str, name: str, value: str) -> Answer:
    if protocol == "json":
        return _json(signed, "SetQueueAttributes",
                     json.dumps({"QueueUrl": queues.standard, "Attributes": {name: value}}))
    return _query(signed, [("Action", "SetQueueAttributes"), ("QueueUrl", queues.standard),
                           ("Attribute.1.Name", name), ("Attribute.1.Value", value)])


_REDRIVE_NOT_A_MAP = "Invalid value for the parameter RedrivePolicy. Reason: Redrive policy is not a valid JSON map."
_ALLOW_UNSUPPORTED = ("Invalid value for the parameter RedriveAllowPolicy. Reason: Amazon SQS can't create the "
                      "redrive allow policy, as it\u2019s in an unsupported format.")


@pytest.mark.parametrize("protocol", ["json", "query"])
@pytest.mark.parametrize(
    ("name", "value", "code", "message"),
    [
        ("Policy", _NESTED, "InvalidAttributeValue", "Invalid value for the parameter Policy."),
        ("Policy", '{"Statement":' + _NESTED + "}", "InvalidAttributeValue", "Invalid value for the parameter Policy."),
        ("RedrivePolicy", _NESTED, "InvalidParameterValue", _REDRIVE_NOT_A_MAP),
        ("RedrivePolicy", '{"maxReceiveCount":' + _NESTED + "}", "InvalidParameterValue", _REDRIVE_NOT_A_MAP),
        ("RedriveAllowPolicy", _NESTED, "InvalidParameterValue", _ALLOW_UNSUPPORTED),
        ("RedriveAllowPolicy", '{"redrivePermission":' + _NESTED + "}", "InvalidParameterValue", _ALLOW_UNSUPPORTED),
    ],
    ids=["policy-array", "policy-statement", "redrive-array", "redrive-member", "allow-array", "allow-member"],
)
def test_a_deeply_nested_document_is_refused_as_sqs_refuses_it(signed: SignedClient, fuzz_queues: FuzzQueues,
                                                               protocol: str, name: str, value: str, code: str,
                                                               message: str) -> None:
    error = _refused(protocol, _set_attribute(signed, fuzz_queues, protocol, name, value))
    assert (error.status, error.code, error.message) == (400, code, message)


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_a_max_receive_count_string_of_thousands_of_digits_is_out_of_range(signed: SignedClient,
                                                                           fuzz_queues: FuzzQueues,
                                                                           protocol: str) -> None:
    policy = f'{{"maxReceiveCount":"{HUGE_DIGITS}","deadLetterTargetArn":"{fuzz_queues.dead_letter_arn}"}}'
    error = _refused(protocol, _set_attribute(signed, fuzz_queues, protocol, "RedrivePolicy", policy))
    assert (error.status, error.code) == (400, "InvalidParameterValue")
    assert error.message == (f"Value {policy} for parameter RedrivePolicy is invalid. Reason: Invalid value for "
                             f"maxReceiveCount: {HUGE_DIGITS}, valid values are from 1 to 1000 both inclusive.")


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_a_max_receive_count_number_of_thousands_of_digits_is_not_a_readable_document(signed: SignedClient,
                                                                                       fuzz_queues: FuzzQueues,
                                                                                       protocol: str) -> None:
    # A number that long is refused by the JSON reader itself (beyond any double), as by JSON readers with a
    # number-length bound, so the document as a whole is unreadable.
    policy = f'{{"maxReceiveCount":{HUGE_DIGITS},"deadLetterTargetArn":"{fuzz_queues.dead_letter_arn}"}}'
    error = _refused(protocol, _set_attribute(signed, fuzz_queues, protocol, "RedrivePolicy", policy))
    assert (error.status, error.code, error.message) == (400, "InvalidParameterValue", _REDRIVE_NOT_A_MAP)


# --- 6. a TaskHandle that decodes to deeply nested JSON --------------------------------------------------


@pytest.mark.parametrize("protocol", ["json", "query"])
@pytest.mark.parametrize("depth", [700, DEEP])  # within the handle length bound, and far past it
def test_a_task_handle_of_deeply_nested_json_is_an_invalid_parameter_value(signed: SignedClient, protocol: str,
                                                                           depth: int) -> None:
    handle = base64.b64encode(("[" * depth + "]" * depth).encode()).decode()
    if protocol == "json":
        answer = _json(signed, "CancelMessageMoveTask", json.dumps({"TaskHandle": handle}))
    else:
        answer = _query(signed, [("Action", "CancelMessageMoveTask"), ("TaskHandle", handle)])
    error = _refused(protocol, answer)
    assert (error.status, error.code, error.message) == (
        400, "InvalidParameterValue", "Value for parameter TaskHandle is invalid.")


# --- 8. a list item with sub-parameters but no value -------------------------------------------------------


def test_a_list_item_without_a_value_leaves_the_list_missing(signed: SignedClient, fuzz_queues: FuzzQueues) -> None:
    # given AddPermission whose only account is "AWSAccountId.1.x=1": an item with no value of its own
    answer = _query(signed, [("Action", "AddPermission"), ("QueueUrl", fuzz_queues.standard), ("Label", "fuzz"),
                             ("ActionName.1", "SendMessage"), ("AWSAccountId.1.x", "1")])
    # then the account list was not given, and SQS says so
    error = _refused("query", answer)
    assert (error.status, error.code) == (400, "MissingParameter")
    assert error.message == "The request must contain the parameter AWSAccountIds."


# --- 7. a WebSocket upgrade --------------------------------------------------------------------------------

_UPGRADE = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": base64.b64encode(b"0123456789abcdef").decode()}


def test_a_websocket_upgrade_of_a_get_is_answered_as_the_plain_request_it_also_is(signed: SignedClient) -> None:
    # given a signed query-protocol ListQueues GET that also asks to upgrade the connection to a WebSocket
    # (hop-by-hop headers, left unsigned as a proxy adding them would leave them)
    answer = signed.send("GET", "/", {}, query="Action=ListQueues&Version=2012-11-05", unsigned_headers=_UPGRADE)
    # then there is no upgrade and no 500: it is answered as SQS answers a ListQueues
    assert answer.status == 200, answer.body
    check_answer("query", answer.status, answer.headers, answer.body)


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_a_websocket_upgrade_with_a_body_gets_no_5xx(signed: SignedClient, protocol: str) -> None:
    # given a signed POST that also asks for a WebSocket upgrade
    if protocol == "json":
        headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"}
        answer = signed.send("POST", "/", headers, b"{}", unsigned_headers=_UPGRADE)
    else:
        headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
        answer = signed.send("POST", "/", headers, b"Action=ListQueues&Version=2012-11-05", unsigned_headers=_UPGRADE)
    # then the answer is SQS's, in the request's protocol, and no 5xx
    check_answer(protocol, answer.status, answer.headers, answer.body)


# --- a batch entry's receipt handle holding a character XML cannot carry ----------------------------------


@pytest.mark.parametrize("handle", ["\x1f", "a\x00b", "\ufffe"])
def test_a_batch_entry_echoing_a_character_xml_cannot_hold_is_still_a_well_formed_answer(
    signed: SignedClient, fuzz_queues: FuzzQueues, handle: str
) -> None:
    # given ChangeMessageVisibilityBatch whose entry's receipt handle is a control character
    answer = _query(signed, [("Action", "ChangeMessageVisibilityBatch"), ("QueueUrl", fuzz_queues.standard),
                             ("ChangeMessageVisibilityBatchRequestEntry.1.Id", "a"),
                             ("ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle", handle),
                             ("ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout", "0")])
    # then the entry fails as SQS fails it, in a document an XML parser reads, the character written as U+FFFD
    assert answer.status == 200, answer.body
    check_answer("query", answer.status, answer.headers, answer.body)
    assert b"<Code>ReceiptHandleIsInvalid</Code>" in answer.body
    assert "\ufffd".encode() in answer.body and handle.encode() not in answer.body
