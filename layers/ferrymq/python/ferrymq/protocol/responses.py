"""Rendering SQS results and errors as HTTP responses, exactly as Amazon SQS writes them in either protocol.

A result is the action's output in its AWS JSON 1.0 shape (binary values as ``bytes``).  Members that are
absent or None are left out; empty lists and maps are left out too, except the members the model marks as
required, which the JSON protocol writes: a batch's ``Successful`` always, its ``Failed`` only when something
failed (AWS leaves an empty ``Failed`` out).  So a ReceiveMessage that found nothing renders as ``{}``.

A query request that accepts ``application/json`` gets the JSON form of the query response instead
(:mod:`ferrymq.protocol.query_json`).

Errors render from the class attributes of :mod:`ferrymq.errors`; anything that is not an ``SqsError`` renders
as ``InternalError`` with its default message, never with the exception's text.

JSON::

    HTTP/1.1 400
    content-type: application/x-amz-json-1.0
    x-amzn-RequestId: <id>
    x-amzn-query-error: AWS.SimpleQueueService.NonExistentQueue;Sender

    {"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}

Query::

    <?xml version="1.0"?><ErrorResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><Error>
    <Type>Sender</Type><Code>AWS.SimpleQueueService.NonExistentQueue</Code><Message>...</Message><Detail/>
    </Error><RequestId>id</RequestId></ErrorResponse>
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

import orjson

from ferrymq.errors import InternalError, SqsError, UnknownOperation
from ferrymq.protocol import ferrymq_model, query_json
from ferrymq.protocol.model import LIST, MAP, OPERATIONS, STRUCTURE, XML_NAMESPACE, Operation, Shape
from ferrymq.protocol.xml import escape_text, write_structure

JSON_CONTENT_TYPE = "application/x-amz-json-1.0"
XML_CONTENT_TYPE = "text/xml"
QUERY_JSON = "query_json"
"""The protocol name of a query request answered in JSON (:mod:`ferrymq.protocol.query_json`)."""
# Required members AWS still leaves out of a JSON response when they are empty.
_LEFT_OUT_WHEN_EMPTY = frozenset({"Failed"})
_XML_DECLARATION = '<?xml version="1.0"?>'
# What UTF-8 cannot carry (lone surrogates; in XML, escape_text also replaces what XML 1.0 cannot carry). An error
# message may echo a client's value, and one a parser chokes on would hide the error from the client.
_NOT_UTF8 = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def render_result(protocol: str, action: str, result: dict[str, Any], request_id: str) -> HttpResponse:
    operation = OPERATIONS.get(action) or ferrymq_model.OPERATIONS.get(action)
    if operation is None:
        raise ValueError(f"unknown action {action!r}")
    if protocol == "json":
        return _json_result(operation, result, request_id)
    if protocol == "query":
        return _xml_result(operation, result, request_id)
    if protocol == QUERY_JSON:
        return HttpResponse(200, _query_json_headers(request_id), query_json.result_body(operation, result, request_id))
    raise ValueError(f"unknown protocol {protocol!r}")


UNKNOWN_OPERATION_BODY = b"<UnknownOperationException/>"
"""SQS's whole answer to a GET naming no action (404), in either protocol."""


def render_error(protocol: str, error: BaseException, request_id: str) -> HttpResponse:
    sqs_error = error if isinstance(error, SqsError) else InternalError()
    fault = "Sender" if sqs_error.sender else "Receiver"
    if isinstance(sqs_error, UnknownOperation):
        # SQS answers a GET naming no action with this bare element, in XML whatever the client accepts.
        headers = [("content-type", XML_CONTENT_TYPE), ("x-amzn-RequestId", request_id)]
        return HttpResponse(sqs_error.status, headers, UNKNOWN_OPERATION_BODY)
    if protocol == "json":
        body = orjson.dumps({"__type": sqs_error.json_type, "message": _writable(sqs_error.message, _NOT_UTF8)})
        headers = [
            ("content-type", JSON_CONTENT_TYPE),
            ("x-amzn-RequestId", request_id),
            ("x-amzn-query-error", f"{sqs_error.query_code};{fault}"),
        ]
        return HttpResponse(sqs_error.status, headers, body)
    message = sqs_error.message
    if protocol == QUERY_JSON:
        body = query_json.error_body(fault, sqs_error.query_code, _writable(message, _NOT_UTF8), request_id)
        return HttpResponse(sqs_error.status, _query_json_headers(request_id), body)
    if sqs_error.query_default_message is not None and message == sqs_error.default_message:
        message = sqs_error.query_default_message
    text = (
        f'{_XML_DECLARATION}<ErrorResponse xmlns="{XML_NAMESPACE}"><Error><Type>{fault}</Type>'
        f"<Code>{escape_text(sqs_error.query_code)}</Code><Message>{escape_text(message)}</Message><Detail/>"
        f"</Error><RequestId>{escape_text(request_id)}</RequestId></ErrorResponse>"
    )
    headers = [("content-type", XML_CONTENT_TYPE), ("x-amzn-RequestId", request_id)]
    return HttpResponse(sqs_error.status, headers, text.encode("utf-8"))


def _query_json_headers(request_id: str) -> list[tuple[str, str]]:
    return [("content-type", query_json.CONTENT_TYPE), ("x-amzn-RequestId", request_id)]


def _writable(message: str, unwritable: re.Pattern[str]) -> str:
    return unwritable.sub("\ufffd", message) if unwritable.search(message) else message


# --- JSON --------------------------------------------------------------------------------------------


def _bytes_as_base64(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _json_result(operation: Operation, result: dict[str, Any], request_id: str) -> HttpResponse:
    body = b"{}" if operation.output is None else orjson.dumps(_json_structure(result, operation.output),
                                                              default=_bytes_as_base64)
    return HttpResponse(200, [("content-type", JSON_CONTENT_TYPE), ("x-amzn-RequestId", request_id)], body)


def _json_structure(value: dict[str, Any], shape: Shape) -> dict[str, Any]:
    members = shape.members
    if shape.scalar_only:
        return {k: v for k, v in value.items() if v is not None and k in members}
    out: dict[str, Any] = {}
    required = shape.required
    for name, item in value.items():
        member = members.get(name)
        if member is None or item is None:
            continue
        kind = member.shape.kind
        if kind in (LIST, MAP, STRUCTURE):
            item = _json_value(item, member.shape)
            if not item and kind != STRUCTURE and (name not in required or name in _LEFT_OUT_WHEN_EMPTY):
                continue
        out[name] = item
    for name in required:
        if name not in out and name not in _LEFT_OUT_WHEN_EMPTY and members[name].shape.kind in (LIST, MAP):
            out[name] = [] if members[name].shape.kind == LIST else {}
    return out


def _json_value(value: Any, shape: Shape) -> Any:
    kind = shape.kind
    if kind == STRUCTURE:
        return _json_structure(value, shape)
    if kind == LIST:
        element = shape.element
        assert element is not None
        if element.kind in (LIST, MAP, STRUCTURE):
            return [_json_value(item, element) for item in value if item is not None]
        return [item for item in value if item is not None]
    if kind == MAP:
        value_shape = shape.value
        assert value_shape is not None
        if value_shape.kind in (LIST, MAP, STRUCTURE):
            return {k: _json_value(v, value_shape) for k, v in value.items() if v is not None}
        return {k: v for k, v in value.items() if v is not None}
    return value


# --- query (XML) -------------------------------------------------------------------------------------


def _xml_result(operation: Operation, result: dict[str, Any], request_id: str) -> HttpResponse:
    action = operation.name
    out = [f'{_XML_DECLARATION}<{action}Response xmlns="{XML_NAMESPACE}">']
    if operation.output is not None:
        out.append(f"<{action}Result>")
        start = len(out)
        write_structure(out, result, operation.output)
        if len(out) == start:
            out[-1] = f"<{action}Result/>"
        else:
            out.append(f"</{action}Result>")
    out.append(f"<ResponseMetadata><RequestId>{escape_text(request_id)}</RequestId></ResponseMetadata>")
    out.append(f"</{action}Response>")
    headers = [("content-type", XML_CONTENT_TYPE), ("x-amzn-RequestId", request_id)]
    return HttpResponse(200, headers, "".join(out).encode("utf-8"))
