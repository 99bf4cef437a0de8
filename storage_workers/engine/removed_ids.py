"""A queue's removed ids (``QueueState.gone``): the ids of plain messages removed within the resend horizon, each
with its ``sent_ts``, in the order they were removed, forgotten from the oldest.

One ordered dict did this, and finding its oldest entry was O(1); but a dict grows by rebuilding its whole table,
and an ordered dict's growth at 700,000 ids held a worker's loop 70-80 ms (150 at 1.4 million: what a queue removes
within 30 s at 47,000 messages a second). Here the ids are kept in dicts of at most :data:`CHUNK` each, the newest
last: a chunk's growth costs a few milliseconds at most, the oldest entry is the first chunk's first, and a lookup
asks each chunk (a lookup is a resend's, which is rare; an insert is a removal's, which is not).

The chunks are plain dicts, not ordered ones: the garbage collector does not track a dict of strings and ints, where
it walks every entry of an ordered dict at each full collection (33 ms at a million ids, 1 ms in plain dicts).  A
plain dict keeps insertion order too, but an entry deleted from its front stays behind as a hole that finding the
first entry steps over; so once the first chunk has more holes than entries, it is copied without them (at most
:data:`CHUNK` entries, a few milliseconds, once per as many deletions).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

CHUNK = 65536
"""The most ids one chunk holds."""


class RemovedIds:
    """Message id -> sent_ts, in removal order (the iteration order), read as an ordered dict is."""

    __slots__ = ("_chunks", "_holes")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, items: Iterable[tuple[Any, int]] = ()) -> None:
        self._chunks: deque[dict[Any, int]] = deque()
        self._holes = 0
        """Entries deleted from the first chunk since it was last copied (or begun)."""
        for message_id, sent_ts in items:
            self[message_id] = sent_ts

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        return None, {"_chunks": self._chunks}

    def __setstate__(self, state: tuple[None, dict[str, Any]]) -> None:
        # Chunks pickled as ordered dicts (before they were plain ones) become plain ones.
        self._chunks = deque(chunk if type(chunk) is dict else dict(chunk) for chunk in state[1]["_chunks"])
        self._holes = 0

    def __setitem__(self, message_id: Any, sent_ts: int) -> None:
        """Remember ``message_id`` as the newest (an id removed twice is kept twice: the engine removes a
        message once, and ids are the front end's, one per message)."""
        chunks = self._chunks
        if not chunks or len(chunks[-1]) >= CHUNK:
            chunks.append({})
        chunks[-1][message_id] = sent_ts

    def __getitem__(self, message_id: Any) -> int:
        for chunk in reversed(self._chunks):
            found = chunk.get(message_id)
            if found is not None:
                return found
        raise KeyError(message_id)

    def __contains__(self, message_id: object) -> bool:
        return any(message_id in chunk for chunk in self._chunks)

    def __iter__(self) -> Iterator[Any]:
        for chunk in self._chunks:
            yield from chunk

    def __len__(self) -> int:
        return sum(len(chunk) for chunk in self._chunks)

    def __bool__(self) -> bool:
        return any(self._chunks)

    def keys(self) -> Iterator[Any]:
        return iter(self)

    def items(self) -> Iterator[tuple[Any, int]]:
        for chunk in self._chunks:
            yield from chunk.items()

    def values(self) -> Iterator[int]:
        for chunk in self._chunks:
            yield from chunk.values()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemovedIds):
            return NotImplemented
        return list(self.items()) == list(other.items())

    def __repr__(self) -> str:
        return f"RemovedIds({list(self.items())!r})"

    def forget_before(self, horizon: int, budget: int) -> bool:
        """Forget ids sent before ``horizon`` from the oldest, at most ``budget`` of them, stopping at the first
        sent since; returns whether it stopped at the budget with more perhaps left."""
        chunks = self._chunks
        while chunks and budget:
            oldest = chunks[0]
            doomed = []
            reached = False
            for message_id, sent_ts in oldest.items():
                if sent_ts >= horizon:
                    reached = True
                    break
                doomed.append(message_id)
                if len(doomed) == budget:
                    break
            for message_id in doomed:
                del oldest[message_id]
            budget -= len(doomed)
            if not oldest:
                chunks.popleft()
                self._holes = 0
                continue
            self._holes += len(doomed)
            if self._holes > len(oldest):
                chunks[0] = dict(oldest)
                self._holes = 0
            if reached:
                return False
        return not budget
