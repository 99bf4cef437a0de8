"""The usage record, version 1: one JSON object per answered request, one per line in the usage bucket.

Both the front end's writer and the Spark jobs import this module, so the field list, the billing-unit rule,
the action classes and the object layout are defined once.  ``FIELDS`` is the schema: name, JSON type,
whether null is allowed, and what it means.  Spark builds its ``StructType`` from it (``spark.schema``).

Object layout in the bucket (``object_key``)::

    usage/v1/dt=YYYY-MM-DD/hour=HH/<instance>-<first record epoch ms>-<sequence>.jsonl.gz

The hour is the record's own (``ts``), never the upload's: a record spooled while S3 was down and uploaded a
day later still lands in the partition of the hour it happened in, so rerunning that date picks it up.

Billing units follow SQS's rule: every 64 KiB chunk of a request's payload (what it sends plus what it gets
back) is one request, and a request always counts as at least one; a batch of up to 10 messages is one
request per 64 KiB of its total payload.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

VERSION = 1
PREFIX = f"usage/v{VERSION}/"
BILLING_CHUNK_BYTES = 64 * 1024
USER_AGENT_MAX = 256
SUCCESS = "Success"
TS_REGEX = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z"
"""What a valid ``ts`` looks like (the Spark jobs apply the same expression)."""
TS_PATTERN = re.compile(TS_REGEX)
UNKNOWN_ACTION = "Unknown"


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: str  # "string", "int", "float"
    nullable: bool
    doc: str


FIELDS: tuple[Field, ...] = (
    Field("v", "int", False, "schema version"),
    Field("ts", "string", False, "request arrival, UTC ISO 8601 with milliseconds, e.g. 2026-11-22T23:41:07.123Z"),
    Field("request_id", "string", False, "request id returned to the client"),
    Field("account", "string", True, "caller's account; null when the request was not authenticated"),
    Field("access_key_id", "string", True, "access key id the request was signed with, known or not"),
    Field("queue_arn", "string", True, "queue the request named"),
    Field("action", "string", False, "SQS action, or Unknown when it could not be parsed"),
    Field("outcome", "string", False, "Success, or the SQS (query protocol) error code"),
    Field("http_status", "int", False, "HTTP status answered"),
    Field("messages_in", "int", False, "messages or batch entries the request carried"),
    Field("entries_failed", "int", False, "batch entries that failed inside a successful batch request"),
    Field("bytes_in", "int", False, "payload bytes sent: message bodies and message attributes"),
    Field("messages_out", "int", False, "messages returned"),
    Field("bytes_out", "int", False, "payload bytes returned: message bodies and message attributes"),
    Field("billable_units", "int", False, "SQS request units: one per started 64 KiB of bytes_in + bytes_out"),
    Field("latency_ms", "float", False, "arrival to response rendered"),
    Field("instance", "string", False, "front-end instance that answered"),
    Field("queue_type", "string", True, "standard or fifo; null without a queue"),
    Field("sse", "string", False, "server-side encryption of the queue: none, sqs or kms"),
    Field("kms_calls", "int", False, "KMS calls this request made"),
    Field("source_ip", "string", True, "client address"),
    Field("user_agent", "string", True, "User-Agent header, truncated"),
)
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)
"""Also the order of a row: the request path buffers a record as a tuple of values in this order (a tuple
costs a fraction of a 22-key dict to build, and holds nothing the garbage collector has to scan)."""
_PY_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "int": (int,), "float": (int, float)}

ACTION_CLASSES: dict[str, str] = {
    "SendMessage": "send",
    "SendMessageBatch": "send",
    "ReceiveMessage": "receive",
    "DeleteMessage": "delete",
    "DeleteMessageBatch": "delete",
    "ChangeMessageVisibility": "visibility",
    "ChangeMessageVisibilityBatch": "visibility",
}
"""Action class of the message actions; every other action is ``management``."""
MANAGEMENT = "management"


def action_class(action: str) -> str:
    return ACTION_CLASSES.get(action, MANAGEMENT)


def billable_units(bytes_in: int, bytes_out: int) -> int:
    return max(1, math.ceil((bytes_in + bytes_out) / BILLING_CHUNK_BYTES))


_second_cache: tuple[int, str] = (-1, "")


def format_ts(epoch_seconds: float) -> str:
    """``ts`` of a record: millisecond precision keeps the string sortable and cheap to parse."""
    global _second_cache
    millis = int(epoch_seconds * 1000)  # truncated, as clocks print milliseconds
    second, milli = divmod(millis, 1000)
    # Records come in time order, many per second: formatting the date once per second saves most of the work.
    cached_second, prefix = _second_cache
    if second != cached_second:
        prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        _second_cache = (second, prefix)
    return f"{prefix}{milli:03d}Z"


def partition_of(ts: str) -> tuple[str, str]:
    """(``YYYY-MM-DD``, ``HH``) of a record's ``ts``."""
    return ts[:10], ts[11:13]


def object_key(dt: str, hour: str, instance: str, first_ms: int, sequence: int) -> str:
    return f"{PREFIX}dt={dt}/hour={hour}/{instance}-{first_ms}-{sequence:06d}.jsonl.gz"


def date_prefix(dt: str) -> str:
    return f"{PREFIX}dt={dt}/"


# --- payload measurement, from the wire-level parameters and results --------------------------------------


def _text_bytes(value: Any) -> int:
    if isinstance(value, str):
        # isascii() is O(1) in CPython (a flag on the string), so only non-ASCII text is encoded to be measured.
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    return 0


def _attributes_bytes(attributes: Any) -> int:
    # SQS counts each attribute's name, data type and value towards the payload.  Most messages have none: an
    # empty or missing value is told apart without the abstract-class check (100 ns, twice a message).
    if not attributes or not isinstance(attributes, Mapping):
        return 0
    size = 0
    for name, value in attributes.items():
        size += _text_bytes(name)
        if isinstance(value, Mapping):
            size += _text_bytes(value.get("DataType"))
            if "BinaryValue" in value:
                binary = value["BinaryValue"]
                # The JSON protocol carries binary values base64-encoded: count the decoded bytes.
                size += len(binary) * 3 // 4 if isinstance(binary, str) else _text_bytes(binary)
            else:
                size += _text_bytes(value.get("StringValue"))
    return size


def _message_bytes(message: Mapping[str, Any], body_key: str) -> int:
    return (_text_bytes(message.get(body_key)) + _attributes_bytes(message.get("MessageAttributes"))
            + _attributes_bytes(message.get("MessageSystemAttributes")))


Payload = tuple[int, int, int, int, int]
"""(messages_in, entries_failed, bytes_in, messages_out, bytes_out): a plain tuple, as it is built on every
request and a tuple costs a tenth of a named one here."""
NO_PAYLOAD: Payload = (0, 0, 0, 0, 0)


def measure(action: str, params: Mapping[str, Any] | None, result: Mapping[str, Any] | None) -> Payload:
    """Messages and payload bytes of one request, from its parsed parameters and (when it succeeded) its result."""
    if params is None:
        return NO_PAYLOAD
    failed = len(result.get("Failed") or ()) if result else 0
    if action == "SendMessage":
        return 1, 0, _message_bytes(params, "MessageBody"), 0, 0
    if action == "SendMessageBatch":
        entries = _entries(params)
        size = sum(_message_bytes(e, "MessageBody") for e in entries if type(e) is dict or isinstance(e, Mapping))
        return len(entries), failed, size, 0, 0
    if action == "ReceiveMessage":
        messages = (result or {}).get("Messages") or ()
        size = sum(_message_bytes(m, "Body") for m in messages if isinstance(m, Mapping))
        return 0, 0, 0, len(messages), size
    if action in ("DeleteMessage", "ChangeMessageVisibility"):
        return 1, 0, 0, 0, 0
    if action in ("DeleteMessageBatch", "ChangeMessageVisibilityBatch"):
        return len(_entries(params)), failed, 0, 0, 0
    return NO_PAYLOAD


def _entries(params: Mapping[str, Any]) -> Sequence[Any]:
    entries = params.get("Entries")
    return entries if isinstance(entries, list) else ()


# --- validation: what the Spark jobs quarantine, defined here so the writer's tests check the same rule ------


def problems(record: Any) -> list[str]:
    """Why ``record`` (a decoded JSON value) is not a valid version-1 usage record; empty when it is."""
    if not isinstance(record, Mapping):
        return ["not a JSON object"]
    found: list[str] = []
    if record.get("v") != VERSION:
        found.append(f"version {record.get('v')!r} is not {VERSION}")
    for spec in FIELDS:
        value = record.get(spec.name)
        if value is None:
            if not spec.nullable:
                found.append(f"{spec.name} missing")
            continue
        if isinstance(value, bool) or not isinstance(value, _PY_TYPES[spec.type]):
            found.append(f"{spec.name} is not {spec.type}")
    ts = record.get("ts")
    if isinstance(ts, str) and not _valid_ts(ts):
        found.append("ts is not an ISO 8601 UTC time")
    return found


def _valid_ts(ts: str) -> bool:
    return TS_PATTERN.fullmatch(ts) is not None
