"""Building requests for the queue engine in unit tests, and reading its answers as dicts."""

from __future__ import annotations

import base64
import struct
import uuid
from hashlib import blake2b
from zlib import crc32

from ferrymq.storage.engine import FIFO_RECEIVED_FIELDS, RECEIVED_FIELDS, Engine, Polled, Redrive

RETENTION = 4 * 24 * 3600

RECEIPT_KEY = bytes(range(32))
"""The partition secret of test engines: fixed, so that engines rebuilt from the same records (replay,
snapshots, recovery from a log) hand out and accept the same receipt handles."""


def fifo_message(
    group: str, body: str = "hello", *, message_id: str | None = None, delay: int = 0, dedup_id: str | None = None
) -> tuple:
    """A FIFO message as ``Engine.store`` takes it."""
    message_id = message_id or str(uuid.uuid4())
    return (message_id, body, {}, f"md5-{body}", None, delay, {}, group, dedup_id or f"dedup-{body}", None)


def plain_message(body: str = "hello", *, system: dict | None = None) -> list:
    """A standard queue's message as ``Engine.send`` takes it."""
    return [str(uuid.uuid4()), body, {}, f"md5-{body}", None, 0, system or {}]


def as_dicts(rows: list[tuple]) -> list[dict]:
    return [
        dict(zip(FIFO_RECEIVED_FIELDS if len(row) > len(RECEIVED_FIELDS) else RECEIVED_FIELDS, row, strict=True))
        for row in rows
    ]


def poll(
    engine: Engine,
    queue: str,
    n: int = 10,
    visibility: int = 30,
    *,
    attempt_id: str | None = None,
    redrive: Redrive | None = None,
    max_in_flight: int | None = None,
    short_poll: bool = True,
    retention: int = RETENTION,
) -> tuple[list[dict], Polled]:
    polled = engine.poll(
        queue,
        n,
        visibility,
        retention,
        attempt_id=attempt_id,
        redrive=redrive,
        max_in_flight=max_in_flight,
        short_poll=short_poll,
    )
    return as_dicts(polled.rows), polled


def bodies(engine: Engine, queue: str, n: int = 10, visibility: int = 30, **kwargs: object) -> list[str]:
    got, _ = poll(engine, queue, n, visibility, **kwargs)  # type: ignore[arg-type]
    return [m["body"] for m in got]


def unkeyed_handle(queue_id: str, seq: int, receive_no: int, message_id: str) -> str:
    """A receipt handle as version 1 made them, with unkeyed tags and a CRC: what anyone who knows a queue id,
    a MessageId and a sequence number could mint."""
    body = struct.pack(
        ">B8sQI8s",
        1,
        blake2b(queue_id.encode(), digest_size=8).digest(),
        seq,
        receive_no,
        blake2b(message_id.encode(), digest_size=8).digest(),
    )
    return base64.urlsafe_b64encode(body + struct.pack(">I", crc32(body))).decode()
