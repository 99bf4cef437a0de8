"""Engine records (:mod:`ferrymq.storage.engine.records`) as log payload bytes: a msgpack array each."""

from __future__ import annotations

import msgpack

from ferrymq.packing import pack
from ferrymq.storage.engine.records import Record


def encode(record: Record) -> bytes:
    return pack(record)


def decode(payload: bytes | memoryview) -> Record:
    record = msgpack.unpackb(payload, raw=False)
    if not isinstance(record, list) or not record or not isinstance(record[0], int):
        raise ValueError("log payload is not a record")
    return tuple(record)


def readable(payload: bytes | memoryview) -> bool:
    """Whether ``payload`` decodes to a record (how a resync scan tells a record from bytes that look like one)."""
    try:
        decode(payload)
    except Exception:
        return False
    return True
