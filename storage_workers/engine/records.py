"""The records the queue engine is fed: every change to message state is one of these.

A record is a plain tuple whose first item is its kind; the log stores them (``storage_workers.log.records``
turns them into bytes) and recovery, followers and compaction feed them back to :meth:`Engine.apply`.
Timestamps are milliseconds since the epoch, taken from the leader's clock when the record was made, so
applying the same records always gives the same state.

    kind        layout
    SENT        (SENT, queue_id, ts, first_seq, [(id, body, attrs, md5_body, md5_attrs, delay, system), ...])
                message i gets sequence number first_seq + i, becomes visible at ts + delay * 1000
    RECEIVED    (RECEIVED, queue_id, ts, deadline, [seq, ...])
                each is in flight until deadline; receive_count += 1; first_receive_ts = ts on the first
    DELETED     (DELETED, queue_id, [seq, ...])
    VISIBILITY  (VISIBILITY, queue_id, [(seq, deadline), ...])      in flight until deadline (<= now: visible)
    EXPIRED     (EXPIRED, queue_id, [seq, ...])                     dropped because retention ran out
    PURGED      (PURGED, queue_id)                                  every message of the queue dropped
    DROPPED     (DROPPED, queue_id)                                 the queue forgotten
    RESTORED    (RESTORED, queue_id, [(seq, id, body, attrs, md5_body, md5_attrs, system, sent_ts,
                 visible_at, receive_count, first_receive_ts), ...])  live messages, written by compaction
    SEQUENCE    (SEQUENCE, next_seq)                                sequence numbers below next_seq are used

Decoded records may hold lists where these hold tuples; the engine indexes them and does not care.
"""

from __future__ import annotations

from typing import Any

SENT = 1
RECEIVED = 2
DELETED = 3
VISIBILITY = 4
EXPIRED = 5
PURGED = 6
DROPPED = 7
RESTORED = 8
SEQUENCE = 9

KINDS = {
    SENT: "SENT",
    RECEIVED: "RECEIVED",
    DELETED: "DELETED",
    VISIBILITY: "VISIBILITY",
    EXPIRED: "EXPIRED",
    PURGED: "PURGED",
    DROPPED: "DROPPED",
    RESTORED: "RESTORED",
    SEQUENCE: "SEQUENCE",
}

Record = tuple[Any, ...]
