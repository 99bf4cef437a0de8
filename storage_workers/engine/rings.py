"""A first-in, first-out sequence of unsigned 64-bit ints kept in one ``array``: 8 bytes an entry, where a
``deque`` of ints costs an 8-byte pointer plus a 32-byte int object each.

The engine's send-order indexes (``order``, ``fresh``, a FIFO group's sequence numbers) only ever append at the
back and take from the front, so a ring needs no more than an array and the index of its first live entry.
Taken entries are cut off in one ``memmove`` once they are at least half of the array, so each entry is moved
O(1) times on average.  Do not append or take while iterating over a ring.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator

_CUT_AT = 1024


class Ring:
    __slots__ = ("_a", "_head", "append")

    def __init__(self, items: Iterable[int] = ()) -> None:
        self._a = array("Q", items)
        self._head = 0
        # The array's own method: appending is the hot path (every message sent), and the array object stays
        # the same when its front is cut off.
        self.append = self._a.append

    def __getstate__(self) -> tuple[array, int]:
        return self._a, self._head

    def __setstate__(self, state: tuple[array, int]) -> None:
        self._a, self._head = state
        self.append = self._a.append

    def popleft(self) -> int:
        a, head = self._a, self._head
        if head >= len(a):
            raise IndexError("pop from an empty ring")
        value = a[head]
        head += 1
        if head >= _CUT_AT and 2 * head >= len(a):
            del a[:head]
            head = 0
        self._head = head
        return value

    def __getitem__(self, i: int) -> int:
        if i < 0:
            if -i > len(self._a) - self._head:
                raise IndexError("ring index out of range")
            return self._a[i]
        return self._a[self._head + i]

    def __len__(self) -> int:
        return len(self._a) - self._head

    def __bool__(self) -> bool:
        return len(self._a) > self._head

    def __iter__(self) -> Iterator[int]:
        a = self._a
        for i in range(self._head, len(a)):
            yield a[i]

    def __reversed__(self) -> Iterator[int]:
        a = self._a
        for i in range(len(a) - 1, self._head - 1, -1):
            yield a[i]

    def __repr__(self) -> str:
        return f"Ring({list(self)!r})"
