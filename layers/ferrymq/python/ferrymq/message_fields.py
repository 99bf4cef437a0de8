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
