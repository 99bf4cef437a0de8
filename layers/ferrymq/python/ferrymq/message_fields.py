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
"""Positions of a FIFO queue's message; ``seq`` is the partition's counter, zero-padded to 20 digits
(:func:`sequence_number` makes the SequenceNumber of it)."""

SEQUENCE_NUMBER_BASE = 18_902_576_384_211_053_147
SEQUENCE_NUMBER_STEP = 65_537
_GAP_HASH = 2_654_435_761
"""Knuth's multiplicative constant, applied to the counter's square (a linear hash would give two gaps only):
spreads each number's place inside its step, so gaps vary as AWS's do."""


def sequence_number(seq: int | str) -> str:
    """The SequenceNumber clients see for a FIFO message's partition sequence number ``seq`` (an int, or the
    zero-padded form the worker RPC carries).

    AWS's are 20-digit numbers around 1.89e19 that grow, with uneven gaps, from one message of a group to the
    next; clients parse, compare and sort them as strings. The partition's counter (dense, carried by the log, so
    it grows across restarts and failovers) is mapped onto that shape: a base with no run of zeros, a step per
    message, and a place inside the step drawn from the counter, below the step so the order is kept. The same
    for every front end; 20 digits for the first 1.2e15 messages of a partition.
    """
    n = int(seq)
    return str(SEQUENCE_NUMBER_BASE + n * SEQUENCE_NUMBER_STEP + n * n * _GAP_HASH % SEQUENCE_NUMBER_STEP)
