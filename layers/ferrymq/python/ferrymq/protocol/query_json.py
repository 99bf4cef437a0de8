"""The JSON form of query-protocol responses, which SQS writes for a query request that accepts
``application/json`` (a presigned GET from a browser, curl, a script that parses JSON).

It is the XML document's tree as JSON, named by the model's member names, not by the XML element names::

    {"ListQueuesResponse": {"ListQueuesResult": {"QueueUrls": ["https://..."]},
                            "ResponseMetadata": {"RequestId": "<id>"}}}

Maps are lists of entries, as the XML writes them (``"Attributes": [{"Name": "QueueArn", "Value": "..."}]``).
Errors::

    {"Error": {"Type": "Sender", "Code": "AWS.SimpleQueueService.NonExistentQueue", "Message": "..."},
     "RequestId": "<id>"}
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from ferrymq.protocol.model import BLOB, LIST, MAP, STRUCTURE, Operation, Shape

CONTENT_TYPE = "application/json"


def result_body(operation: Operation, result: dict[str, Any], request_id: str) -> bytes:
    action = operation.name
    response: dict[str, Any] = {}
    if operation.output is not None:
        response[f"{action}Result"] = _structure(result, operation.output)
    response["ResponseMetadata"] = {"RequestId": request_id}
    return orjson.dumps({f"{action}Response": response})


def error_body(fault: str, code: str, message: str, request_id: str) -> bytes:
    return orjson.dumps({"Error": {"Type": fault, "Code": code, "Message": message}, "RequestId": request_id})


def _structure(value: dict[str, Any], shape: Shape) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, member in shape.members.items():
        item = value.get(name)
        if item is not None:
            out[name] = _value(item, member.shape)
    return out


def _value(value: Any, shape: Shape) -> Any:
    kind = shape.kind
    if kind == STRUCTURE:
        return _structure(value, shape)
    if kind == LIST:
        element = shape.element
        assert element is not None
        return [_value(item, element) for item in value if item is not None]
    if kind == MAP:
        key_shape, value_shape = shape.key, shape.value
        assert key_shape is not None and value_shape is not None
        return [{shape.key_name: _value(k, key_shape), shape.value_name: _value(v, value_shape)}
                for k, v in value.items() if v is not None]
    if kind == BLOB:
        return base64.b64encode(value).decode("ascii")
    return value
