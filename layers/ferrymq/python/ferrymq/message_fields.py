"""The order of a received message's fields, shared by the queue engine (which makes the rows) and the worker
RPC (which carries them to the front end untouched). It lives here, apart from both, because the engine may
not depend on the RPC."""

from __future__ import annotations

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
"""Positions of a standard queue's message in a receive result."""

FIFO_RECEIVED_MESSAGE_FIELDS = (*RECEIVED_MESSAGE_FIELDS, "seq", "group", "dedup_id")
"""Positions of a FIFO queue's message; ``seq`` is the 20-digit SequenceNumber."""

SEQUENCE_NUMBER_BASE = 18_000_000_000_000_000_000
SEQUENCE_NUMBER_STEP = 256


def sequence_number(seq: int | str) -> str:
    """The SequenceNumber clients see for a FIFO message's partition sequence number ``seq`` (an int, or the
    zero-padded form the worker RPC carries).

    AWS's are 20-digit numbers around 1.8e19 that grow, with gaps, from one message to the next; clients that
    parse or compare them expect that shape, so the partition's counter is mapped onto it (order-preserving,
    the same for every front end, and far from 20 digits' end: 3e17 messages fit).
    """
    return str(SEQUENCE_NUMBER_BASE + int(seq) * SEQUENCE_NUMBER_STEP)
