"""The request parser and the validators behind it, fuzzed in-process: every input parses or is refused with a
client error that renders in SQS's shape in both protocols; nothing else escapes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferrymq.errors import SqsError
from ferrymq.frontend import message_checks
from ferrymq.frontend.actions import move_tasks, permissions
from ferrymq.metadata import policy, queue_attributes, redrive
from ferrymq.protocol.requests import SqsRequest, parse_request
from ferrymq.protocol.responses import render_error
from tests.fuzz.answers import check_answer
from tests.fuzz.profiles import fuzz_settings
from tests.fuzz.strategies import (
    NESTED_INPUT_ACTIONS,
    JsonRequest,
    Known,
    QueryRequest,
    any_value,
    json_request_strategy,
    nested_json,
    numbers_as_text,
    policies,
    query_requests,
    redrive_allow_policies,
    redrive_policies,
    task_handles,
)

KNOWN = Known()
_FORM = {"content-type": "application/x-www-form-urlencoded"}
_JSON = {"content-type": "application/x-amz-json-1.0"}


def _refused_well(error: SqsError, context: object) -> None:
    assert error.sender and 400 <= error.status < 500, (context, error.code, error.message)
    for protocol in ("json", "query"):
        response = render_error(protocol, error, "fuzz-request")
        check_answer(protocol, response.status, {k.lower(): v for k, v in response.headers}, response.body, context)


def _entries_checked(entry_name: str, each: Callable[[dict[str, Any]], Any] | None = None) -> Callable[..., Any]:
    def check(params: dict[str, Any]) -> None:
        entries = message_checks.check_batch_entries(params.get("Entries"), entry_name)
        for entry in entries if each is not None else ():
            each(entry)  # type: ignore[misc]
    return check


def _send_entry(entry: dict[str, Any]) -> None:
    message_checks.check_body(entry.get("MessageBody"))
    message_checks.check_message_attributes(entry.get("MessageAttributes"))


def _task_handle(params: dict[str, Any]) -> None:
    handle = message_checks.require(params, "TaskHandle")
    move_tasks._read_task_handle(handle)


# The checks each action's handler makes on its input before it needs a queue, run one by one.
_VALIDATORS: dict[str, list[Callable[[dict[str, Any]], Any]]] = {
    "SendMessage": [lambda p: message_checks.check_body(p.get("MessageBody")),
                    lambda p: message_checks.check_message_attributes(p.get("MessageAttributes"))],
    "SendMessageBatch": [_entries_checked("SendMessageBatchRequestEntry", _send_entry)],
    "DeleteMessageBatch": [_entries_checked("DeleteMessageBatchRequestEntry")],
    "ChangeMessageVisibilityBatch": [_entries_checked("ChangeMessageVisibilityBatchRequestEntry")],
    "CreateQueue": [lambda p: queue_attributes.check_settable(
        p.get("Attributes") or {}, fifo=str(p.get("QueueName", "")).endswith(".fifo"))],
    "SetQueueAttributes": [lambda p: queue_attributes.check_settable(p.get("Attributes") or {}, fifo=False),
                           lambda p: queue_attributes.check_settable(p.get("Attributes") or {}, fifo=True)],
    "GetQueueAttributes": [lambda p: message_checks.check_attribute_names(p.get("AttributeNames"),
                                                                          queue_attributes.ALL)],
    "ReceiveMessage": [lambda p: message_checks.optional_int(p, "MaxNumberOfMessages", 1, 10),
                       lambda p: message_checks.optional_int(p, "WaitTimeSeconds", 0, 20)],
    "CancelMessageMoveTask": [_task_handle],
    "AddPermission": [permissions._label, permissions._actions, permissions._accounts],
}


def _parsed_and_validated(method: str, query_string: str, headers: dict[str, str], body: bytes,
                          context: object) -> SqsRequest | None:
    try:
        request = parse_request(method, "/", query_string, headers, body)
    except SqsError as error:
        _refused_well(error, context)
        return None
    for validate in _VALIDATORS.get(request.action, ()):
        try:
            validate(request.params)
        except SqsError as error:
            _refused_well(error, context)
    return request


@fuzz_settings(500)
@given(st.one_of(query_requests(KNOWN), query_requests(KNOWN, NESTED_INPUT_ACTIONS)), st.booleans())
def test_query_requests_parse_or_are_refused_with_an_sqs_error(request: QueryRequest, as_get: bool) -> None:
    # given any query-protocol request, as a form body or as a GET query string
    encoded = urlencode(request.pairs)
    # when it is parsed and validated, then the only failures are client errors in SQS's shape
    if as_get:
        _parsed_and_validated("GET", encoded, {}, b"", request)
    else:
        _parsed_and_validated("POST", "", _FORM, encoded.encode(), request)


@fuzz_settings(500)
@given(st.one_of(json_request_strategy(KNOWN), json_request_strategy(KNOWN, NESTED_INPUT_ACTIONS)))
def test_json_requests_parse_or_are_refused_with_an_sqs_error(request: JsonRequest) -> None:
    headers = {**_JSON, "x-amz-target": f"AmazonSQS.{request.action}"}
    _parsed_and_validated("POST", "", headers, request.body, request)


@fuzz_settings(300)
@given(st.sampled_from(sorted(queue_attributes.SETTABLE)), st.one_of(nested_json, numbers_as_text, any_value(KNOWN)))
def test_any_queue_attribute_value_is_checked_or_refused(name: str, value: str) -> None:
    for fifo in (False, True):
        try:
            queue_attributes.check_settable({name: value}, fifo=fifo)
        except SqsError as error:
            _refused_well(error, (name, value))


@fuzz_settings(300)
@given(st.one_of(policies(KNOWN), redrive_policies(KNOWN), redrive_allow_policies(KNOWN), nested_json,
                 any_value(KNOWN)))
def test_any_document_is_read_or_refused(text: str) -> None:
    for check in (policy.check_policy, redrive.check_redrive_policy, redrive.check_redrive_allow_policy):
        try:
            check(text)
        except SqsError as error:
            _refused_well(error, (check.__name__, text))


@fuzz_settings(200)
@given(task_handles)
def test_any_task_handle_is_read_or_refused(handle: str) -> None:
    try:
        move_tasks._read_task_handle(handle)
    except SqsError as error:
        _refused_well(error, handle)


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_an_unexpected_exception_renders_as_internal_failure_without_its_text(protocol: str) -> None:
    # given an exception that is no SqsError
    response = render_error(protocol, RuntimeError("secret internals"), "r-1")
    # then it is SQS's InternalFailure, a 500 without the exception's text
    assert response.status == 500
    assert b"InternalFailure" in response.body
    assert b"secret internals" not in response.body
