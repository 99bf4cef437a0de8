"""Payload codec of the worker RPC: msgpack, with ``bytes`` kept distinct from ``str``.

Tuples travel as arrays and come back as lists.  Map keys must be strings.
"""

from __future__ import annotations

from typing import Any

import msgpack

from ferrymq.errors import SqsError, error_for_code

_packb = msgpack.packb
_unpackb = msgpack.unpackb


def pack(obj: Any) -> bytes:
    return _packb(obj, use_bin_type=True)


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
# Requests and results are msgpack arrays, positional to keep them small and quick to build:
#
#   op                 request payload                                       ok result
#   PING               []                                                    {"worker_id", "partition", ...}
#   SEND               [queue_id, [SENT_MESSAGE...], retention_seconds]     [[id, sent_ts], ...]
#   RECEIVE            [queue_id, max_messages, visibility_timeout,          [RECEIVED_MESSAGE...]
#                       wait_seconds, retention_seconds]
#   DELETE             [queue_id, [receipt, ...]]                            [None | [code, message], ...]
#   CHANGE_VISIBILITY  [queue_id, [[receipt, timeout], ...]]                 [None | [code, message], ...]
#   PURGE              [queue_id]                                            None
#   DROP_QUEUE         [queue_id]                                            None
#   STATS              [queue_id, retention_seconds]                         [visible, in_flight, delayed]

SENT_MESSAGE_FIELDS = ("id", "body", "attrs", "md5_body", "md5_attrs", "delay", "system")
"""Positions of a message in a SEND request."""

RECEIVED_MESSAGE_FIELDS = (
    "id",
    "receipt",
    "body",
    "attrs",
    "md5_body",
    "md5_attrs",
    "system",
    "sent_ts",
    "first_receive_ts",
    "receive_count",
)
"""Positions of a message in a RECEIVE result."""

STATS_FIELDS = ("visible", "in_flight", "delayed")
