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
# Requests and results are msgpack arrays, positional to keep them small and quick to build.  Trailing
# elements marked [optional] may be left out; a request without them means what it meant before they existed.
# Every request but PING starts with the partition it is about; a worker that does not serve that partition
# answers NotLeader and changes nothing.
#
#   op                 request payload                                       ok result
#   PING               []                                                    {"worker_id", "partitions":
#                                                                             {"<partition>": {...}}, ...}
#   SEND               [partition, queue_id, [SENT_MESSAGE...],              standard: [[id, sent_ts], ...]
#                       retention_seconds [, fifo [, resend]]]               FIFO or handed over:
#                                                                            [[id, sent_ts, seq, duplicate], ...]
#   RECEIVE            [partition, queue_id, max_messages,                   [RECEIVED_MESSAGE...] (standard) or
#                       visibility_timeout, wait_seconds,                    [FIFO_RECEIVED_MESSAGE...] (FIFO)
#                       retention_seconds [, RECEIVE_OPTIONS]]
#   DELETE             [partition, queue_id, [receipt, ...]]                 [None | [code, message], ...]
#   CHANGE_VISIBILITY  [partition, queue_id, [[receipt, timeout], ...]]      [None | [code, message], ...]
#   PURGE              [partition, queue_id]                                 None
#   DROP_QUEUE         [partition, queue_id]                                 None
#   STATS              [partition, queue_id, retention_seconds]              [visible, in_flight, delayed]
#   START_MOVE_TASK    [partition, queue_id, task]                           MOVE_TASK
#   LIST_MOVE_TASKS    [partition, queue_id]                                 [MOVE_TASK, ...], most recent first
#   CANCEL_MOVE_TASK   [partition, queue_id, task_handle]                    {"moved": int}
#   PEEK               [partition, queue_id, max_messages,                   as RECEIVE, each receipt None
#                       retention_seconds]
#   FETCH              [partition, replica, epoch, from_offset,              [[epoch, offset, payload], ...]
#                       durable_offset, max_bytes, wait_ms]
#   OFFSET_FOR_EPOCH   [partition, epoch, asked_epoch]                       [epoch, end_offset] | None
#   SNAPSHOT           [partition, replica, epoch, chunk]                    [offset, epoch, [[epoch, first],
#                                                                            ...], chunks, [payload, ...]]
#
# ``resend`` (true) marks a standard send that repeats one whose outcome is unknown, with the same message
# ids; the worker skips the ids it stored within the resend horizon (see Engine.send).  No time travels with
# it: the two machines' clocks need not agree.  (Version 1 sent the first attempt's time here, an integer,
# which workers still take as true.)
# FETCH, OFFSET_FOR_EPOCH and SNAPSHOT are the replication stream's (ferrymq.storage.replication).
#
# A SENT_MESSAGE is SENT_MESSAGE_FIELDS, optionally followed by HANDOVER_FIELDS: ``group`` and ``dedup_id``
# (FIFO queues), and ``origin`` for a message handed over from another queue (dead-letter redrive, move
# tasks): None, or {"sent_ts": int | None, "receive_count": int, "first_receive_ts": int}.  Messages sent with
# fifo or with an origin are stored idempotently by id.  RECEIVE_OPTIONS is a map with the optional keys
# "fifo", "attempt_id", "redrive" and "max_in_flight".  A MOVE_TASK is a map with MOVE_TASK_FIELDS as keys.

SENT_MESSAGE_FIELDS = ("id", "body", "attrs", "md5_body", "md5_attrs", "delay", "system")
"""Positions of a message in a SEND request."""

HANDOVER_FIELDS = ("group", "dedup_id", "origin")
"""Positions, after SENT_MESSAGE_FIELDS, of the fields of FIFO and handed-over messages."""

REDRIVE_FIELDS = (
    "max_receive_count",
    "dlq_queue_id",
    "dlq_partition",
    "dlq_fifo",
    "source_arn",
    "dlq_retention_seconds",
)
"""Keys of the ``redrive`` receive option."""

MOVE_TASK_FIELDS = (
    "task_handle",
    "status",
    "source_arn",
    "destination_arn",
    "max_per_second",
    "moved",
    "to_move",
    "failure_reason",
    "started_ts",
)

STATS_FIELDS = ("visible", "in_flight", "delayed")
DEPTH_FIELDS = (*STATS_FIELDS, "oldest_age_ms")
