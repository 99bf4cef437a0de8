"""How many bytes a message counts towards SQS's size limits, as a sending client sees it.

SQS counts the body's UTF-8 bytes plus, for each message attribute, the UTF-8 bytes of its name and data
type and the bytes of its value (a string's UTF-8 bytes, a binary value's raw bytes, not their base64).
Message system attributes (AWSTraceHeader) do not count. The front end counts a SendMessageBatch the same
way against ``limits.MAX_BATCH_BYTES`` and each message against the queue's ``MaximumMessageSize``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def message_bytes(body: object, attributes: object = None) -> int:
    """The size of a message with ``body`` and ``attributes`` (boto3's form, or a request's not yet checked:
    what is not a string or a map counts nothing)."""
    size = 0
    if isinstance(body, str):
        # An ASCII string's length is its UTF-8 bytes' (isascii is a flag CPython keeps): no copy to count.
        size = len(body) if body.isascii() else len(body.encode())
    if attributes and isinstance(attributes, Mapping):
        size += attributes_bytes(attributes)
    return size


def attributes_bytes(attributes: Mapping[str, Any]) -> int:
    """Bytes a message's attributes count: the name, data type and value of each."""
    size = 0
    for name, value in attributes.items():
        size += len(str(name).encode())
        if not isinstance(value, Mapping):
            continue
        size += len(str(value.get("DataType", "")).encode())
        binary = value.get("BinaryValue")
        if binary is not None:
            size += _binary_length(binary)
        else:
            size += len(str(value.get("StringValue") or "").encode())
    return size


def _binary_length(value: object) -> int:
    # botocore takes a str for a blob and sends its UTF-8 bytes.
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bytes | bytearray | memoryview):
        return memoryview(value).nbytes
    return 0
