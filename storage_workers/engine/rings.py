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
    __slots__ = ("_a", "_head", "_taken", "append")

    def __init__(self, items: Iterable[int] = ()) -> None:
        self._a = array("Q", items)
        self._head = 0
        self._taken = 0
        """Entries taken from the front so far: an entry's place counted from the ring's first (:meth:`chunk`)."""
        # The array's own method: appending is the hot path (every message sent), and the array object stays
        # the same when its front is cut off.
        self.append = self._a.append

    def __getstate__(self) -> tuple[array, int, int]:
        return self._a, self._head, self._taken

    def __setstate__(self, state: tuple[array, int] | tuple[array, int, int]) -> None:
        self._a, self._head = state[0], state[1]
        self._taken = state[2] if len(state) > 2 else 0  # a ring pickled before the count was kept
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
        self._taken += 1
        return value

    @property
    def taken(self) -> int:
        """The place of the front entry, counted from the first the ring ever held."""
        return self._taken

    def chunk(self, place: int, n: int) -> tuple[array, int]:
        """Up to ``n`` entries from ``place`` (counted as :attr:`taken` counts; those taken since start at the
        front), and the place after them."""
        i = self._head + max(place - self._taken, 0)
        part = self._a[i : i + n]
        return part, self._taken + i - self._head + len(part)

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
