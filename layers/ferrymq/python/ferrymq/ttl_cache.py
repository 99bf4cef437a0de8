"""A bounded cache whose entries expire, for lookups the front end must not repeat on every request."""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

from ferrymq.clock import Clock

K = TypeVar("K")
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """Entries live ``ttl`` seconds on the clock's monotonic time; past ``max_entries`` the least recently
    stored go first.

    Every entry lives the same ``ttl`` and a put moves its key to the end, so the entries are in expiry
    order: each put also drops the expired ones at the front, and a cache of names that are never asked
    for again (deleted queues, churned keys) holds only what the last ``ttl`` seconds stored.
    """

    def __init__(self, clock: Clock, ttl: float, max_entries: int = 10_000) -> None:
        self._clock = clock
        self._ttl = ttl
        self._max_entries = max_entries
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        """Entries held, expired ones not yet dropped included: what the cache costs in memory."""
        return len(self._entries)

    def get(self, key: K) -> V | None:
        hit = self._entries.get(key)
        if hit is None:
            return None
        if hit[0] <= self._clock.monotonic():
            del self._entries[key]
            return None
        return hit[1]

    def put(self, key: K, value: V) -> None:
        now = self._clock.monotonic()
        entries = self._entries
        entries[key] = (now + self._ttl, value)
        entries.move_to_end(key)
        while len(entries) > self._max_entries:
            entries.popitem(last=False)
        while entries:
            oldest = next(iter(entries.values()))
            if oldest[0] > now:
                break
            entries.popitem(last=False)

    def pop(self, key: K) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget every entry: what was stored may no longer be true anywhere."""
        self._entries.clear()
