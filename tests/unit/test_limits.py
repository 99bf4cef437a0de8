"""The FIFO deduplication window as the front end claims it, against the window in which a worker still knows a
stored message id."""

from __future__ import annotations

from typing import Any

from ferrymq import limits
from ferrymq.aws.dedup_store import DedupStore


class _Table:
    """A DynamoDB client that accepts every put and keeps the last item."""

    def __init__(self) -> None:
        self.item: dict[str, Any] = {}

    def put_item(self, **request: Any) -> dict:
        self.item = request["Item"]
        return {}


def test_a_claim_lasts_the_dedup_window_and_a_worker_remembers_longer_by_the_clock_allowance() -> None:
    # given a claim made at t = 1000 s by the front end's clock
    table = _Table()
    assert DedupStore(table, "dedup").claim("q#g#d", "id-1", 1000.0) == "id-1"
    # then it expires one dedup window later
    lasts = int(table.item["expires_at"]["N"]) - 1000
    assert lasts == limits.DEDUP_WINDOW_SECONDS
    # and a worker whose clock is off by the allowed difference still knows the id for all of that time
    assert lasts * 1000 + limits.MAX_CLOCK_DIFFERENCE_SECONDS * 1000 <= limits.RESEND_WINDOW_MS
