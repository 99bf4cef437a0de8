"""The SQS service model, compiled once at import into the tables the parser and renderers walk.

The shapes come from botocore's current SQS model (the AWS JSON 1.0 one).  That model no longer carries the
``locationName`` traits of the 2012-11-05 query-protocol model, yet query-protocol clients still send and expect
those names (``Attribute.1.Name``, ``<MessageAttribute>``, ``SendMessageBatchRequestEntry.1.Id`` ...).  Every list
and map in SQS is flattened, and a flattened member takes its name from the list's element name or the map's
entry name, so the few tables below are all it takes to recover the legacy names for every member.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from botocore.loaders import Loader

API_VERSION = "2012-11-05"
XML_NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"
TARGET_PREFIX = "AmazonSQS."

# Shape kinds.  Plain strings: compared by identity-fast equality on the hot path.
STRING = "string"
INTEGER = "integer"
LONG = "long"
BOOLEAN = "boolean"
BLOB = "blob"
STRUCTURE = "structure"
LIST = "list"
MAP = "map"
SCALARS = frozenset({STRING, INTEGER, LONG, BOOLEAN, BLOB})

# Legacy query names (facts from the 2012-11-05 query model): the element name of each list shape ...
_LIST_ELEMENT_NAMES: dict[str, str] = {
    "AWSAccountIdList": "AWSAccountId",
    "ActionNameList": "ActionName",
    "AttributeNameList": "AttributeName",
    "BatchResultErrorEntryList": "BatchResultErrorEntry",
    "BinaryList": "BinaryListValue",
    "ChangeMessageVisibilityBatchRequestEntryList": "ChangeMessageVisibilityBatchRequestEntry",
    "ChangeMessageVisibilityBatchResultEntryList": "ChangeMessageVisibilityBatchResultEntry",
    "DeleteMessageBatchRequestEntryList": "DeleteMessageBatchRequestEntry",
    "DeleteMessageBatchResultEntryList": "DeleteMessageBatchResultEntry",
    "ListMessageMoveTasksResultEntryList": "ListMessageMoveTasksResultEntry",
    "MessageAttributeNameList": "MessageAttributeName",
    "MessageList": "Message",
    # Younger than the query model; named the way the query API documents it.
    "MessageSystemAttributeList": "MessageSystemAttributeName",
    "QueueUrlList": "QueueUrl",
    "SendMessageBatchRequestEntryList": "SendMessageBatchRequestEntry",
    "SendMessageBatchResultEntryList": "SendMessageBatchResultEntry",
    "StringList": "StringListValue",
    "TagKeyList": "TagKey",
}

# ... and the entry, key and value names of each map shape.
_MAP_NAMES: dict[str, tuple[str, str, str]] = {
    "QueueAttributeMap": ("Attribute", "Name", "Value"),
    "MessageSystemAttributeMap": ("Attribute", "Name", "Value"),
    "MessageBodyAttributeMap": ("MessageAttribute", "Name", "Value"),
    "MessageBodySystemAttributeMap": ("MessageSystemAttribute", "Name", "Value"),
    "TagMap": ("Tag", "Key", "Value"),
}


@dataclass(eq=False, slots=True)
class Shape:
    """One shape of the model.  Structures list their members; lists their element; maps their key and value."""

    name: str
    kind: str
    members: dict[str, Member] = field(default_factory=dict)  # structure: by JSON member name
    by_query_name: dict[str, Member] = field(default_factory=dict)  # structure: by legacy query/XML name
    required: frozenset[str] = frozenset()
    scalar_only: bool = False  # structure whose members are all scalars (the renderers' fast path)
    element: Shape | None = None  # list
    key: Shape | None = None  # map
    value: Shape | None = None  # map
    element_name: str = "member"  # list: element tag; map: entry tag
    key_name: str = "key"
    value_name: str = "value"
    flattened: bool = False


@dataclass(frozen=True, slots=True)
class Member:
    """A structure member: its JSON name, its legacy query/XML name and whether it repeats without a wrapper."""

    name: str
    query_name: str
    shape: Shape
    flattened: bool


@dataclass(frozen=True, slots=True)
class Operation:
    name: str
    input: Shape
    output: Shape | None


def build_operations(raw: dict[str, Any]) -> dict[str, Operation]:
    """The operations of a botocore service model (SQS's, or FerryMQ's own), their shapes compiled."""
    raw_shapes: dict[str, Any] = raw["shapes"]
    built: dict[str, Shape] = {}

    def shape(name: str) -> Shape:
        if name in built:
            return built[name]
        spec = raw_shapes[name]
        kind = spec["type"]
        out = Shape(name=name, kind=kind, flattened=bool(spec.get("flattened", False)))
        built[name] = out  # before recursing, so a self-referencing shape would terminate
        if kind == STRUCTURE:
            out.required = frozenset(spec.get("required", ()))
            for member_name, ref in spec.get("members", {}).items():
                target = shape(ref["shape"])
                flattened = bool(ref.get("flattened", False)) or target.flattened
                query_name = member_name
                if flattened and target.kind in (LIST, MAP):
                    query_name = target.element_name
                member = Member(name=member_name, query_name=query_name, shape=target, flattened=flattened)
                out.members[member_name] = member
                out.by_query_name[query_name] = member
            out.scalar_only = all(m.shape.kind in SCALARS for m in out.members.values())
        elif kind == LIST:
            out.element = shape(spec["member"]["shape"])
            out.element_name = _LIST_ELEMENT_NAMES.get(name, "member")
        elif kind == MAP:
            out.key = shape(spec["key"]["shape"])
            out.value = shape(spec["value"]["shape"])
            out.element_name, out.key_name, out.value_name = _MAP_NAMES.get(name, ("entry", "key", "value"))
        elif kind not in SCALARS:
            raise ValueError(f"SQS model shape {name} has unsupported type {kind}")
        return out

    operations: dict[str, Operation] = {}
    for op_name, op in raw["operations"].items():
        output = op.get("output")
        operations[op_name] = Operation(
            name=op_name,
            input=shape(op["input"]["shape"]),
            output=shape(output["shape"]) if output else None,
        )
    return operations


def _load() -> dict[str, Any]:
    return Loader().load_service_model("sqs", "service-2", api_version=API_VERSION)


OPERATIONS: dict[str, Operation] = build_operations(_load())
