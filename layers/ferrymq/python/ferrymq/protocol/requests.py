"""Turning an HTTP request into an SQS call, whichever wire protocol carried it.

Two protocols reach us:

- AWS JSON 1.0: ``POST`` with ``content-type: application/x-amz-json-1.0``, ``x-amz-target: AmazonSQS.<Action>``
  and the input as a JSON object.  FerryMQ's own actions (:mod:`ferrymq.protocol.ferrymq_model`) come this way
  only, as ``x-amz-target: FerryMQ.<Action>``.
- The query protocol: ``Action=<Action>&Version=2012-11-05&...`` in a form-encoded ``POST`` body or a ``GET``
  query string, every list and map flattened into numbered parameters (``Attribute.1.Name``,
  ``SendMessageBatchRequestEntry.2.MessageAttribute.1.Value.DataType``).  The queue URL may be the request
  path instead of a ``QueueUrl`` parameter.

Either way the action handler receives one shape: the action's input as AWS JSON 1.0 has it (botocore member
names), with integers as ``int``, booleans as ``bool`` and blobs as ``bytes``.  Checking required parameters
and value ranges is left to the handlers; this module only rejects what cannot be read at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote, unquote_plus

import orjson

from ferrymq.errors import (
    InvalidAction,
    InvalidParameterValue,
    MissingParameter,
    SerializationError,
    UnknownOperation,
    UnsupportedProtocol,
)
from ferrymq.protocol import ferrymq_model
from ferrymq.protocol.decoding import decode_base64, index_order, is_index, parse_int
from ferrymq.protocol.model import (
    BLOB,
    BOOLEAN,
    INTEGER,
    LIST,
    LONG,
    MAP,
    OPERATIONS,
    SCALARS,
    STRING,
    STRUCTURE,
    TARGET_PREFIX,
    Shape,
)

JSON_CONTENT_TYPE = "application/x-amz-json-1.0"
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class SqsRequest:
    action: str  # e.g. "SendMessage"
    params: dict[str, Any]  # always the AWS JSON 1.0 shape of the action's input
    protocol: Literal["json", "query"]
    # Query protocol: the request path when it names a queue ("/000000000000/q1"), else None.
    path_queue_url_path: str | None


def parse_request(method: str, path: str, query_string: str, headers: Mapping[str, str], body: bytes) -> SqsRequest:
    """Parse one request.  ``headers`` has lower-case names; ``path`` is the path as sent (still percent-encoded)."""
    content_type = headers.get("content-type", "").lower()
    target = headers.get("x-amz-target")
    if target is not None or content_type.startswith("application/x-amz-json"):
        return _parse_json(content_type, target, body)
    return _parse_query(method, path, query_string, content_type, body)


def response_protocol(request_protocol: str, headers: Mapping[str, str]) -> Literal["json", "query", "query_json"]:
    """The protocol to answer in: a query-protocol request that accepts ``application/json`` (a GET from a
    browser or curl, say) gets the JSON form of the query response (``query_json``), as AWS answers it;
    anything else is answered in its own protocol."""
    if request_protocol == "json":
        return "json"
    if "application/json" in headers.get("accept", "").lower():
        return "query_json"
    return "query"


# --- AWS JSON 1.0 ------------------------------------------------------------------------------------


def _parse_json(content_type: str, target: str | None, body: bytes) -> SqsRequest:
    if not content_type.startswith(JSON_CONTENT_TYPE):
        raise UnsupportedProtocol(f"Unsupported content type for the JSON protocol: {content_type or 'none'}.")
    if not target:
        raise UnsupportedProtocol("The request must carry an X-Amz-Target header.")
    if target.startswith(TARGET_PREFIX):
        action = target[len(TARGET_PREFIX) :]
        operation = OPERATIONS.get(action)
    elif target.startswith(ferrymq_model.TARGET_PREFIX):
        action = target[len(ferrymq_model.TARGET_PREFIX) :]
        operation = ferrymq_model.OPERATIONS.get(action)
    else:
        action, operation = target, None
    if operation is None:
        raise InvalidAction(f"The action {action} is not valid for this endpoint.")
    if body.strip():
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise SerializationError("The request body is not valid JSON.") from exc
    else:
        document = {}
    if document is None:
        document = {}  # a JSON null input is no input, as for null members
    if not isinstance(document, dict):
        raise SerializationError(_unexpected(document, STRUCTURE))
    return SqsRequest(action, _json_structure(document, operation.input), "json", None)


# Type names and articles as the JSON protocol's type errors word them ("STRING_VALUE can not be converted to
# an Integer").
_TYPE_WORDS = {
    STRING: "a String",
    INTEGER: "an Integer",
    LONG: "a Long",
    BOOLEAN: "a Boolean",
    BLOB: "a Blob",
}


def _unexpected(value: Any, kind: str) -> str:
    if isinstance(value, dict):
        return "Start of structure or map found where not expected."
    if isinstance(value, list):
        return "Start of list found where not expected."
    token = "STRING_VALUE" if isinstance(value, str) else "BOOLEAN_VALUE" if isinstance(value, bool) else "NUMBER_VALUE"
    if kind in (STRUCTURE, MAP):
        return f"{token} found where a structure or map was expected."
    if kind == LIST:
        return f"{token} found where a list was expected."
    return f"{token} can not be converted to {_TYPE_WORDS[kind]}"


def _json_value(value: Any, shape: Shape) -> Any:
    kind = shape.kind
    if kind == STRING:
        if type(value) is str:
            return value
    elif kind in (INTEGER, LONG):
        if type(value) is int:
            low, high = _INT32 if kind == INTEGER else _INT64
            if low <= value <= high:
                return value
            raise SerializationError(f"NUMBER_VALUE {value} is out of range for {_TYPE_WORDS[kind]}")
        if type(value) is float and value.is_integer():
            return _json_value(int(value), shape)
    elif kind == STRUCTURE:
        if type(value) is dict:
            return _json_structure(value, shape)
    elif kind == LIST:
        if type(value) is list:
            element = shape.element
            assert element is not None
            return [_json_value(item, element) for item in value if item is not None]
    elif kind == MAP:
        if type(value) is dict:
            key_shape, value_shape = shape.key, shape.value
            assert key_shape is not None and value_shape is not None
            return {_json_value(k, key_shape): _json_value(v, value_shape) for k, v in value.items() if v is not None}
    elif kind == BLOB:
        if type(value) is str:
            blob = decode_base64(value)
            if blob is None:
                raise SerializationError("Base64 encoded binary value is not valid.")
            return blob
    elif kind == BOOLEAN and type(value) is bool:
        return value
    raise SerializationError(_unexpected(value, kind))


def _json_structure(document: dict[str, Any], shape: Shape) -> dict[str, Any]:
    members = shape.members
    out: dict[str, Any] = {}
    if shape.scalar_only:
        for name, value in document.items():
            member = members.get(name)
            # Unknown members are ignored and null means absent, as AWS JSON services treat them.
            if member is None or value is None:
                continue
            if member.shape.kind == STRING and type(value) is str:
                out[name] = value
            else:
                out[name] = _json_value(value, member.shape)
        return out
    for name, value in document.items():
        member = members.get(name)
        if member is None or value is None:
            continue
        out[name] = _json_value(value, member.shape)
    return out


# --- query protocol ----------------------------------------------------------------------------------


def _parse_query(method: str, path: str, query_string: str, content_type: str, body: bytes) -> SqsRequest:
    try:
        flat = _form_fields(query_string) if query_string else {}
        if method == "POST" and body:
            if not content_type.startswith(FORM_CONTENT_TYPE):
                raise UnsupportedProtocol(f"Unsupported content type for the query protocol: {content_type or 'none'}.")
            flat.update(_form_fields(body.decode("utf-8")))
    except UnicodeDecodeError as exc:
        raise InvalidParameterValue("The request parameters are not valid UTF-8.") from exc
    action = flat.pop("Action", None)
    queue_path = _queue_path(path)
    if not action:
        if method == "GET":
            # A browser opening the endpoint or a queue URL: AWS answers that there is no such operation.
            raise UnknownOperation()
        raise MissingParameter("The request must contain the parameter Action.")
    operation = OPERATIONS.get(action)
    if operation is None or (queue_path is not None and action in _NOT_ON_A_QUEUE):
        raise InvalidAction(f"The action {action} is not valid for this endpoint.")
    params = _query_structure(_group(flat), operation.input, "")
    return SqsRequest(action, params, "query", queue_path)


# Actions about no queue in particular, which AWS refuses when sent to a queue's URL.
_NOT_ON_A_QUEUE = frozenset({"CreateQueue", "ListQueues"})


def _form_fields(text: str) -> dict[str, str]:
    """Decode ``a=1&b=x+y%21`` (form encoding: ``+`` is a space).  Unescaped fields skip the decoder entirely."""
    fields: dict[str, str] = {}
    for pair in text.split("&"):
        if not pair:
            continue
        name, _, value = pair.partition("=")
        if "%" in name or "+" in name:
            name = unquote_plus(name, errors="strict")
        if "%" in value or "+" in value:
            value = unquote_plus(value, errors="strict")
        fields[name] = value
    return fields


def _queue_path(path: str) -> str | None:
    trimmed = path.split("?", 1)[0].rstrip("/")
    return unquote(trimmed) if trimmed else None


# A parameter tree: the value given for this exact name (if any) and the children named below it.
_Tree = tuple[str | None, dict[str, Any]]


def _group(flat: Mapping[str, str]) -> dict[str, _Tree]:
    """Split dotted parameter names into a tree: {"Attribute": (None, {"1": (None, {"Name": ("x", {})})})}."""
    root: dict[str, list[Any]] = {}
    for name, value in flat.items():
        if "." not in name:
            entry = root.get(name)
            if entry is None:
                root[name] = [value, {}]
            else:
                entry[0] = value
            continue
        node = root
        parts = name.split(".")
        last = len(parts) - 1
        for i, part in enumerate(parts):
            entry = node.get(part)
            if entry is None:
                entry = node[part] = [None, {}]
            if i == last:
                entry[0] = value
            node = entry[1]
    return root  # type: ignore[return-value]


def _query_structure(children: Mapping[str, Any], shape: Shape, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for query_name, member in shape.by_query_name.items():
        node = children.get(query_name)
        if node is None and query_name != member.name:
            # An empty list is sent under the member's own name ("AttributeNames="); accept either spelling.
            node = children.get(member.name)
        if node is None:
            continue
        value = _query_value(node, member.shape, member.flattened, f"{prefix}{query_name}")
        if value is not None:
            out[member.name] = value
    return out


def _indexed(children: Mapping[str, Any]) -> list[Any]:
    """The numbered children ("1", "2", ...) in index order; anything else ("x", "\u00b2") is not part of a
    list and, like any parameter naming no member, is ignored."""
    numbered = [(index_order(k), v) for k, v in children.items() if is_index(k)]
    numbered.sort(key=lambda item: item[0])
    return [v for _, v in numbered]


def _query_value(node: Any, shape: Shape, flattened: bool, name: str) -> Any:
    text, children = node
    kind = shape.kind
    if kind == STRING:
        return text
    if kind == STRUCTURE:
        return _query_structure(children, shape, f"{name}.")
    if kind == LIST:
        element = shape.element
        assert element is not None
        if not flattened:
            children = children.get(shape.element_name, (None, {}))[1]
        items = _indexed(children)
        if not items and text is not None:
            # "AttributeNames=" is an explicitly empty list; a bare "AttributeName=All" a list of one.
            return [_query_scalar(text, element.kind, name)] if text and element.kind in SCALARS else []
        values = (_query_value(item, element, False, f"{name}.{i}") for i, item in enumerate(items, 1))
        # An item given only sub-parameters ("AWSAccountId.1.x=1") has no value: it is dropped, as the JSON
        # protocol drops a null list item.  A list left with no item was not given at all: the query protocol
        # spells an empty list only as "AttributeNames=".
        present = [value for value in values if value is not None]
        return present or None
    if kind == MAP:
        key_shape, value_shape = shape.key, shape.value
        assert key_shape is not None and value_shape is not None
        if not flattened:
            children = children.get("entry", (None, {}))[1]
        out: dict[str, Any] = {}
        for i, entry in enumerate(_indexed(children), 1):
            entry_children = entry[1]
            key_node = entry_children.get(shape.key_name)
            value_node = entry_children.get(shape.value_name)
            if key_node is None or key_node[0] is None or value_node is None:
                continue
            out[key_node[0]] = _query_value(value_node, value_shape, False, f"{name}.{i}.{shape.value_name}")
        return out
    if text is None:
        return None
    return _query_scalar(text, kind, name)


def _query_scalar(text: str, kind: str, name: str) -> Any:
    if kind in (INTEGER, LONG):
        number = parse_int(text)
        if number is not None:
            low, high = _INT32 if kind == INTEGER else _INT64
            if low <= number <= high:
                return number
        raise InvalidParameterValue(f"Value {text} for parameter {name} is invalid. Reason: Must be an integer.")
    if kind == BOOLEAN:
        lowered = text.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise InvalidParameterValue(f"Value {text} for parameter {name} is invalid. Reason: Must be true or false.")
    if kind == BLOB:
        blob = decode_base64(text)
        if blob is None:
            raise InvalidParameterValue(
                f"Value {text} for parameter {name} is invalid. Reason: Must be base64-encoded binary."
            )
        return blob
    return text
