"""The MD5 digests SQS returns so clients can check what it stored.

``MD5OfMessageBody`` is the MD5 of the body's UTF-8 bytes.  ``MD5OfMessageAttributes`` (and, by the same rule,
``MD5OfMessageSystemAttributes``) digests the attributes sorted by name, each encoded as::

    len(name) | name | len(data type) | data type | transport | len(value) | value

lengths as 4-byte big-endian integers, text as UTF-8, and the transport byte 1 for a ``StringValue``
(String and Number types, custom suffixes included) or 2 for a ``BinaryValue``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

_STRING_TRANSPORT = b"\x01"
_BINARY_TRANSPORT = b"\x02"


def md5_of_body(body: str) -> str:
    return hashlib.md5(body.encode("utf-8"), usedforsecurity=False).hexdigest()


def _length_prefixed(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def md5_of_attributes(attrs: Mapping[str, Mapping[str, Any]] | None) -> str | None:
    """The digest of message (or message system) attributes in their JSON shape; None when there are none."""
    if not attrs:
        return None
    digest = hashlib.md5(usedforsecurity=False)
    for name in sorted(attrs):
        attribute = attrs[name]
        data_type: str = attribute["DataType"]
        digest.update(_length_prefixed(name.encode("utf-8")))
        digest.update(_length_prefixed(data_type.encode("utf-8")))
        binary = attribute.get("BinaryValue")
        if data_type.startswith("Binary") and binary is not None:
            digest.update(_BINARY_TRANSPORT)
            digest.update(_length_prefixed(bytes(binary)))
        else:
            digest.update(_STRING_TRANSPORT)
            digest.update(_length_prefixed(str(attribute.get("StringValue", "")).encode("utf-8")))
    return digest.hexdigest()
