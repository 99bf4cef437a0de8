"""The bodies a worker read or stored lately, shared by its partitions and bounded in bytes.

Message bodies live in the log (:mod:`.bodies`); this keeps the recent ones in memory so that a consumer keeping up
with its producers never reads the disk: a stored body goes in once it is durable, a body read from disk goes in
as it is read, and the least recently used go first when the bytes pass the limit.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

ENTRY_OVERHEAD = 160
"""What keeping a body costs beside its bytes: the object's header, its key and its place in the ordered dict
(measured with tracemalloc: ~170 B), so that the limit bounds the memory the cache really takes."""
_OTHER_SIZE = 64
"""What a body that is neither text nor bytes is counted as (none is, in a worker; tests store others)."""


PAIR_OVERHEAD = 120
"""A body kept with its MD5: the pair and the MD5's text."""


def body_size(body: Any) -> int:
    """What keeping ``body`` costs: a body, or a pair of a body and its MD5."""
    if isinstance(body, str | bytes):
        return ENTRY_OVERHEAD + len(body)
    if type(body) is tuple and len(body) == 2 and isinstance(body[0], str | bytes):
        return ENTRY_OVERHEAD + PAIR_OVERHEAD + len(body[0])
    return ENTRY_OVERHEAD + _OTHER_SIZE


class BodyCache:
    """Bodies (or pairs of a body and its MD5) by key, least recently used first; :meth:`owner` numbers the key
    spaces of the stores that share it."""

    __slots__ = ("_entries", "_owners", "hits", "limit", "misses", "size")

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        """At most this many bytes of bodies are kept (0: none)."""
        self.size = 0
        """Bytes of the bodies kept now."""
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[int, Any] = OrderedDict()
        self._owners = 0

    def owner(self) -> int:
        """A number no other store sharing this cache has, to tell its keys from theirs."""
        self._owners += 1
        return self._owners

    def get(self, key: int) -> Any:
        """The body kept under ``key`` (now the most recently used), or None."""
        body = self._entries.get(key)
        if body is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return body

    def put(self, key: int, body: Any) -> None:
        if body is None or not self.limit:
            return
        entries = self._entries
        old = entries.pop(key, None)
        if old is not None:
            self.size -= body_size(old)
        entries[key] = body
        self.size += body_size(body)
        while self.size > self.limit:
            _, evicted = entries.popitem(last=False)
            self.size -= body_size(evicted)

    def drop(self, key: int) -> None:
        body = self._entries.pop(key, None)
        if body is not None:
            self.size -= body_size(body)

    def __len__(self) -> int:
        return len(self._entries)
