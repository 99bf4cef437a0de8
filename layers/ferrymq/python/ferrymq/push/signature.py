"""The signature on an HTTP push, and its check for receivers written in Python.

Each POST carries ``X-FerryMQ-Timestamp`` (Unix seconds) and ``X-FerryMQ-Signature: v1=<hex>``, the
HMAC-SHA256 under the mapping's signing secret of ``timestamp + "." + body``. Binding the timestamp in lets a
receiver refuse a recorded push replayed later; hex keeps the header ASCII."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

TIMESTAMP_HEADER = "X-FerryMQ-Timestamp"
SIGNATURE_HEADER = "X-FerryMQ-Signature"
MAPPING_HEADER = "X-FerryMQ-Mapping"
DELIVERY_HEADER = "X-FerryMQ-Delivery"
VERSION = "v1"
TOLERANCE_SECONDS = 300


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The signature header's value for ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"{VERSION}={digest}"


def signed_headers(secret: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: signature(secret, timestamp, body)}


def verify(secret: str, headers: Mapping[str, str], body: bytes, now: float,
           tolerance: float = TOLERANCE_SECONDS) -> bool:
    """Whether ``body`` with ``headers`` (any case) was signed with ``secret`` within ``tolerance`` of ``now``."""
    lowered = {k.lower(): v for k, v in headers.items()}
    stamp = lowered.get(TIMESTAMP_HEADER.lower(), "")
    given = lowered.get(SIGNATURE_HEADER.lower(), "")
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12 or abs(now - int(stamp)) > tolerance:
        return False
    return hmac.compare_digest(given.encode(), signature(secret, int(stamp), body).encode())
