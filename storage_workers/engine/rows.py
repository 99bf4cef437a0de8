"""What leaves the engine for a consumer or another queue: received rows with their receipt handles, and
messages as they are to be stored elsewhere (dead-letter redrive, move tasks)."""

from __future__ import annotations

from ferrymq.message_fields import FIFO_RECEIVED_MESSAGE_FIELDS, RECEIVED_MESSAGE_FIELDS
from ferrymq.storage.engine.messages import Message
from ferrymq.storage.engine.receipts import Receipts
from ferrymq.storage.engine.tasks import DLQ_SOURCE_ARN, Outgoing

RECEIVED_FIELDS = RECEIVED_MESSAGE_FIELDS
"""Order of the tuples a receive returns for standard queues; the worker sends them on as they are."""

FIFO_RECEIVED_FIELDS = FIFO_RECEIVED_MESSAGE_FIELDS
"""Order of the tuples returned for FIFO queues."""


def received_rows(receipts: Receipts, queue_tag: bytes, fifo: bool, messages: list[Message]) -> list[tuple]:
    """``messages``, just received, as rows ordered like RECEIVED_FIELDS (FIFO_RECEIVED_FIELDS if ``fifo``)."""
    encode, id_tag = receipts.encode, receipts.id_tag
    rows = []
    for m in messages:
        t, slot, seq = m.t, m.slot, m.seq
        message_id, body, attrs, md5_body, md5_attrs, system, dedup_id = t.fields(slot)
        count = t.receives[slot]
        row = (
            message_id,
            encode(queue_tag, seq, count, id_tag(message_id)),
            body,
            attrs,
            md5_body,
            md5_attrs,
            system,
            t.sent[slot],
            t.first_receive[slot],
            count,
        )
        rows.append((*row, f"{seq:020d}", t.group_of(slot), dedup_id) if fifo else row)
    return rows


def outgoing(m: Message) -> Outgoing:
    t, slot = m.t, m.slot
    message_id, body, attrs, md5_body, md5_attrs, system, dedup_id = t.fields(slot)
    return Outgoing(
        m.seq,
        message_id,
        body,
        attrs,
        md5_body,
        md5_attrs,
        system,
        t.sent[slot],
        t.receives[slot],
        t.first_receive[slot],
        t.group_of(slot),
        dedup_id,
    )


def for_dead_letter_queue(m: Message, source_arn: str, dlq_fifo: bool) -> Outgoing:
    """``m`` as the dead-letter queue stores it.

    It keeps its id, body, attributes and receive count, and names its source queue.  A standard DLQ keeps
    the original enqueue time (retention counts from the first send); a FIFO DLQ resets it, and replaces the
    deduplication id with the message id, so two messages that shared a deduplication id both fit in.
    """
    system = {**m.system, DLQ_SOURCE_ARN: source_arn}
    if dlq_fifo:
        return outgoing(m)._replace(system=system, sent_ts=None, group=m.group or m.id, dedup_id=m.id)
    return outgoing(m)._replace(system=system, group=None, dedup_id=None)


def stored_item(c: Outgoing, now: int) -> tuple:
    """A STORED record item for a message handed over at ``now``: visible at once."""
    return (
        c.id,
        c.body,
        c.attrs,
        c.md5_body,
        c.md5_attrs,
        c.system,
        now if c.sent_ts is None else c.sent_ts,
        now,
        c.receive_count,
        c.first_receive_ts,
        c.group,
        c.dedup_id,
    )
