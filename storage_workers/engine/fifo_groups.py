"""A FIFO queue's message groups, each held in one ``bytearray`` that the garbage collector never walks.

A group is the sequence numbers of its messages in send order, how many of them are live and how many in flight.
Held as objects (a group, its ring of sequence numbers, the ring's array), a queue of a million one-message groups
kept about four million objects the collector tracks, and one full collection walked them all: 1.2 s with the
worker's loop held, whatever the queue was doing.  A ``bytearray`` holds no references, so the collector does not
track it, nor the dictionary of them (a dictionary whose keys and values are all untracked is not tracked either).

Each group's bytes::

    0        8       16         24          24 + 8 n
    +--------+-------+----------+-----------------------------------+
    | start  | live  | in flight| sequence numbers, u64 each ...    |
    +--------+-------+----------+-----------------------------------+

``start`` is the offset of the first entry not yet dropped: entries are dropped from the front by moving it, and
cut off in one ``memmove`` once they are at least half of the bytes, so each entry moves O(1) times on average.
An entry whose message was removed stays until it reaches the front (:meth:`Groups.first`), or until dead entries
are more than twice the live ones plus :data:`_SLACK`, when the group's entries are rewritten without them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator

_HEAD = struct.Struct("<QQQ")
_SEQ = struct.Struct("<Q")
_FIRST = _HEAD.size
_CUT_AT = 8 * 1024
"""Bytes of dropped entries at least, before they are cut off the front."""
_SLACK = 16


class Groups:
    """Group name -> its sequence numbers (send order), live count and in-flight count."""

    __slots__ = ("_by_name",)

    def __init__(self) -> None:
        self._by_name: dict[str, bytearray] = {}

    def __getstate__(self) -> dict[str, bytearray]:
        return self._by_name

    def __setstate__(self, state: dict[str, bytearray]) -> None:
        """From a checkpoint: what is not a group's bytes as :meth:`add` writes them is refused (ValueError), so
        a crafted or damaged file fails to load rather than a receive later."""
        if type(state) is not dict:
            raise ValueError("groups are not a dictionary")
        for name, g in state.items():
            if type(name) is not str or type(g) is not bytearray or len(g) < _FIRST or len(g) % _SEQ.size:
                raise ValueError(f"group {name!r} is malformed")
            start, live, inflight = _HEAD.unpack_from(g)
            if (not _FIRST <= start <= len(g) or start % _SEQ.size or not 0 < live <= (len(g) - start) // _SEQ.size
                    or inflight > live):
                raise ValueError(f"group {name!r} is malformed")
        self._by_name = state

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def names(self) -> Iterator[str]:
        return iter(self._by_name)

    @classmethod
    def of(cls, groups: Iterable[tuple[str, Iterable[int], int, int]]) -> Groups:
        """Groups from ``(name, sequence numbers in send order, live, in flight)``."""
        made = cls()
        for name, seqs, live, inflight in groups:
            g = made._by_name[name] = bytearray(_HEAD.pack(_FIRST, live, inflight))
            for seq in seqs:
                g += _SEQ.pack(seq)
        return made

    def add(self, name: str, seq: int, in_flight: bool) -> None:
        """A message sent to group ``name`` (made if new), last in its order."""
        g = self._by_name.get(name)
        if g is None:
            self._by_name[name] = bytearray(_HEAD.pack(_FIRST, 1, 1 if in_flight else 0) + _SEQ.pack(seq))
            return
        start, live, inflight = _HEAD.unpack_from(g)
        _HEAD.pack_into(g, 0, start, live + 1, inflight + 1 if in_flight else inflight)
        g += _SEQ.pack(seq)

    def remove(self, name: str, in_flight: bool) -> bool:
        """A message of group ``name`` removed; whether the group lives on (else it is gone, with its entries)."""
        g = self._by_name[name]
        start, live, inflight = _HEAD.unpack_from(g)
        if live == 1:
            del self._by_name[name]
            return False
        _HEAD.pack_into(g, 0, start, live - 1, inflight - 1 if in_flight else inflight)
        return True

    def in_flight(self, name: str) -> int:
        return _HEAD.unpack_from(self._by_name[name])[2]

    def flight(self, name: str, change: int) -> None:
        """A message of group ``name`` went in flight (+1) or came back (-1)."""
        g = self._by_name[name]
        start, live, inflight = _HEAD.unpack_from(g)
        _HEAD.pack_into(g, 0, start, live, inflight + change)

    def first(self, name: str, alive: Callable[[int], bool]) -> int | None:
        """The sequence number of the group's first live message (``alive`` says which are), dropping the dead
        entries in front of it; None for a group that is gone."""
        g = self._by_name.get(name)
        if g is None:
            return None
        start, live, inflight = _HEAD.unpack_from(g)
        was, end = start, len(g)
        while start < end:
            seq = _SEQ.unpack_from(g, start)[0]
            if alive(seq):
                break
            start += _SEQ.size
        else:
            seq = None
        if (end - start) // _SEQ.size > 2 * live + _SLACK:
            kept = [s for s in self._entries(g, start) if alive(s)]
            g[_FIRST:] = b"".join(_SEQ.pack(s) for s in kept)
            start = _FIRST
        elif start - _FIRST >= _CUT_AT and 2 * (start - _FIRST) >= end - _FIRST:
            del g[_FIRST:start]
            start = _FIRST
        if start != was:
            _HEAD.pack_into(g, 0, start, live, inflight)
        return seq

    def seqs(self, name: str) -> Iterator[int]:
        """The group's entries in send order, dead ones among them (change nothing in the group meanwhile)."""
        g = self._by_name.get(name)
        if g is None:
            return iter(())
        return self._entries(g, _HEAD.unpack_from(g)[0])

    @staticmethod
    def _entries(g: bytearray, start: int) -> Iterator[int]:
        unpack = _SEQ.unpack_from
        for offset in range(start, len(g), _SEQ.size):
            yield unpack(g, offset)[0]
