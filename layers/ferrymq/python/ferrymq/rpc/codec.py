"""Payload codec of the worker RPC: msgpack, with ``bytes`` kept distinct from ``str``.

Tuples travel as arrays and come back as lists.  Map keys must be strings.  What the payloads hold is
declared in :mod:`ferrymq.rpc.shapes`.
"""

from __future__ import annotations

from typing import Any

import msgpack

from ferrymq.errors import SqsError, error_for_code
from ferrymq.packing import pack
from ferrymq.rpc.shapes import DEPTH_ANSWER, MOVE_TASK_FIELDS, REDRIVE_FIELDS, SENT_MESSAGE, STATS_ANSWER

_unpackb = msgpack.unpackb


def unpack(data: bytes) -> Any:
    return _unpackb(data, raw=False)


def pack_error(error: SqsError) -> bytes:
    """The payload of a status-1 response."""
    return pack({"code": error.code, "message": error.message})


def unpack_error(data: bytes) -> SqsError:
    """The exception a status-1 response stands for."""
    try:
        body = unpack(data)
        code, message = str(body["code"]), str(body["message"])
    except Exception:
        return error_for_code("InternalFailure")()
    return error_for_code(code)(message)


# --- payload shapes --------------------------------------------------------------------------------
# What each request and answer holds is declared in ferrymq.rpc.shapes (``python -m ferrymq.rpc.shapes`` prints
# the table).  These names stay for the modules that read them from here.

SENT_MESSAGE_FIELDS = SENT_MESSAGE.fields[: SENT_MESSAGE.required]
"""Positions of a message in a SEND request."""

HANDOVER_FIELDS = SENT_MESSAGE.fields[SENT_MESSAGE.required :]
"""Positions, after SENT_MESSAGE_FIELDS, of the fields of FIFO and handed-over messages."""

STATS_FIELDS = STATS_ANSWER.fields
DEPTH_FIELDS = DEPTH_ANSWER.fields

__all__ = [
    "DEPTH_FIELDS",
    "HANDOVER_FIELDS",
    "MOVE_TASK_FIELDS",
    "REDRIVE_FIELDS",
    "SENT_MESSAGE_FIELDS",
    "STATS_FIELDS",
    "pack",
    "pack_error",
    "unpack",
    "unpack_error",
]
