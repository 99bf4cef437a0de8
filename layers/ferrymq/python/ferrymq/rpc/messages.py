"""The message maps ``WorkerClient.send`` takes, built in one place for the front end and for workers handing
messages over to each other; their keys are the fields of :data:`ferrymq.rpc.shapes.SENT_MESSAGE`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class Origin(NamedTuple):
    """The history a message keeps when it is handed over from another queue (dead-letter redrive, move tasks);
    ``sent_ts`` None means "now, wherever it lands"."""

    sent_ts: int | None
    receive_count: int
    first_receive_ts: int


def sent_message(
    message_id: str,
    body: str,
    attrs: Mapping[str, Any],
    md5_body: str,
    md5_attrs: str | None,
    system: Mapping[str, Any],
    *,
    delay: int = 0,
    group: str | None = None,
    dedup_id: str | None = None,
    origin: Origin | None = None,
) -> dict[str, Any]:
    """One message for ``WorkerClient.send``; ``group`` and ``dedup_id`` are a FIFO message's."""
    return {
        "id": message_id,
        "body": body,
        "attrs": attrs,
        "md5_body": md5_body,
        "md5_attrs": md5_attrs,
        "delay": delay,
        "system": system,
        "group": group,
        "dedup_id": dedup_id,
        "origin": None if origin is None else origin._asdict(),
    }
