"""Looking at a queue's visible messages without receiving them (FerryMQ's PeekMessages).

A peek is a pure read: it changes no field, index or count of the queue and commits no record, so it leaves
nothing in the log and nothing a follower would have to repeat. It therefore cannot lean on the helpers a
receive uses (``release_due`` moves due messages between indexes, expiry commits records) and reads what a
message is at ``now`` from its fields alone, as :mod:`.messages` defines it: visible when ``visible_at <= now``
(an in-flight message whose visibility ran out, or a delayed one whose delay did, is visible even before a
receive notices), expired once ``sent_ts + retention <= now``.

Messages come in send order, whatever their priority level or FIFO group: a peek shows what is there, not
what the next receive would pick. The walk follows ``order`` and stops after ``max_messages``; in the worst
case (every message in flight) it looks at each message once.
"""

from __future__ import annotations

from ferrymq.storage.engine.messages import QueueState


def peek_rows(q: QueueState, now: int, max_messages: int, retention_seconds: int) -> list[tuple]:
    """Up to ``max_messages`` visible, unexpired messages of ``q`` at ``now`` (ms), oldest first, as rows ordered
    like a receive's (``RECEIVED_FIELDS``, or ``FIFO_RECEIVED_FIELDS`` for a FIFO queue) with no receipt
    handle (None in its place)."""
    if max_messages <= 0 or not q.msgs:
        return []
    cutoff = now - retention_seconds * 1000
    msgs = q.msgs
    rows: list[tuple] = []
    for seq in q.order:
        m = msgs.get(seq)
        if m is None or m.visible_at > now or m.sent_ts <= cutoff:
            continue
        message_id, body, attrs, md5_body, md5_attrs, system, dedup_id = m.t.fields(m.slot)
        row = (message_id, None, body, attrs, md5_body, md5_attrs, system, m.sent_ts, m.first_receive_ts,
               m.receive_count)
        rows.append((*row, f"{m.seq:020d}", m.group, dedup_id) if q.fifo else row)
        if len(rows) >= max_messages:
            break
    return rows
