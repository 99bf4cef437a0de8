"""The records the queue engine is fed: every change to message state is one of these.

A record is a plain tuple whose first item is its kind; the log stores them (``ferrymq.storage.log.records``
turns them into bytes) and recovery, followers and compaction feed them back to
:meth:`~.state.PartitionState.apply`.  Timestamps are milliseconds since the epoch, taken from the leader's
clock when the record was made, so applying the same records always gives the same state.

    kind          layout
    SENT          (SENT, queue_id, ts, first_seq, [(id, body, attrs, md5_body, md5_attrs, delay, system), ...])
                  message i gets sequence number first_seq + i, becomes visible at ts + delay * 1000
    RECEIVED      (RECEIVED, queue_id, ts, deadline, [seq, ...] [, attempt_id])
                  each is in flight until deadline; receive_count += 1; first_receive_ts = ts on the first;
                  attempt_id (FIFO queues, optional) is the ReceiveRequestAttemptId that may replay it
    DELETED       (DELETED, queue_id, [seq, ...])
    VISIBILITY    (VISIBILITY, queue_id, [(seq, deadline), ...])      in flight until deadline (<= now: visible)
    EXPIRED       (EXPIRED, queue_id, [seq, ...])                     dropped because retention ran out
    PURGED        (PURGED, queue_id)                                  every message of the queue dropped (and,
                                                                      FIFO queues, the ids of the resend window)
    DROPPED       (DROPPED, queue_id [, ts])                          the queue forgotten; with ts (when), sends to
                                                                      its id are refused for a while after
    RESTORED      (RESTORED, queue_id, [(seq, id, body, attrs, md5_body, md5_attrs, system, sent_ts,
                   visible_at, receive_count, first_receive_ts [, group, dedup_id, attempt_id]), ...])
                  live messages, written by compaction (FIFO messages carry the three last fields)
    SEQUENCE      (SEQUENCE, next_seq)                                sequence numbers below next_seq are used
    STORED        (STORED, queue_id, ts, first_seq, fifo, [(id, body, attrs, md5_body, md5_attrs, system,
                   sent_ts, visible_at, receive_count, first_receive_ts, group, dedup_id), ...])
                  messages stored with every field given: FIFO sends and messages handed over from another
                  queue; each id is remembered for the resend window; fifo makes a new queue a FIFO queue
    BATCH         (BATCH, [record, ...])                              several records applied as one
    RENEWED       (RENEWED, queue_id, attempt_id, deadline)           a replayed receive attempt: its messages
                                                                      are in flight until deadline again
    QUEUE_META    (QUEUE_META, queue_id, fifo, [task, ...])           written by compaction: the queue's type and
                                                                      move tasks (task: see MoveTask.as_record)
    RESENDS       (RESENDS, queue_id, [(id, seq, sent_ts, stored_ts), ...])
                  written by compaction, in chunks: ids in the resend window, added to it
    ATTEMPTS      (ATTEMPTS, queue_id, [(attempt_id, ts, [seq, ...]), ...])
                  written by compaction, in chunks: replayable receive attempts, added
    GONE          (GONE, queue_id, last_sent_ts, [(id, sent_ts), ...])
                  written by compaction, in chunks: plain messages removed soon after they were sent, added,
                  and when the queue's last plain send was (see QueueState.gone)
    TASK_STARTED  (TASK_STARTED, queue_id, handle, source_arn, destination, max_per_second, started_ts,
                   limit_seq, to_move)                                a message move task, RUNNING
    TASK_MOVED    (TASK_MOVED, queue_id, handle, [seq, ...])          handed to the destination: removed here
    TASK_STATUS   (TASK_STATUS, queue_id, handle, status, failure_reason)
    CREDITS       (CREDITS, queue_id, [credit, ...])                  the priority scheduler's credits per level
                                                                      after a receive (ferrymq.storage.engine.
                                                                      priorities); [] when all are 0

A message's priority level is no field of its own: it is ``system["FerryMQPriority"]`` (absent: level 0) in
the items of SENT, STORED and RESTORED (``ferrymq.priorities``).

Kinds 1-9 are those of the first log format; 10-18 were added for FIFO queues, dead-letter queues and move
tasks, 19 for resends across a failover, 20 for priorities.  A log written before them replays unchanged, so
there is nothing to migrate.

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
STORED = 10
BATCH = 11
RENEWED = 12
QUEUE_META = 13
TASK_STARTED = 14
TASK_MOVED = 15
TASK_STATUS = 16
RESENDS = 17
ATTEMPTS = 18
GONE = 19
CREDITS = 20

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
    STORED: "STORED",
    BATCH: "BATCH",
    RENEWED: "RENEWED",
    QUEUE_META: "QUEUE_META",
    TASK_STARTED: "TASK_STARTED",
    TASK_MOVED: "TASK_MOVED",
    TASK_STATUS: "TASK_STATUS",
    RESENDS: "RESENDS",
    ATTEMPTS: "ATTEMPTS",
    GONE: "GONE",
    CREDITS: "CREDITS",
}

Record = tuple[Any, ...]
