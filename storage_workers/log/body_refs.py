"""Compaction without a second copy of the message bodies.

Compaction replays the sealed segments into a fresh state while the worker's own state stays in memory, so
folding the records as they are would hold every live body twice.  Instead, the records go to the fold
with each sizeable body and its attributes replaced by a :class:`BodyRef` naming where they lie on disk
(segment, the byte position and length of the frame's payload, position in the record), and the fold's
output is streamed through :func:`resolve_bodies`, which reads each referenced body back from its sealed
segment just before it is written to the new base segment.  The fold's peak is the live messages'
metadata, not their bodies.  Both frame formats hold a record's payload in one piece, so a payload's
position and length are all it takes to read it back.

Which fields hold bodies follows the record layouts of :mod:`ferrymq.storage.engine.records`: items of
``SENT`` and ``STORED`` carry ``body, attrs`` at positions 1 and 2, items of ``RESTORED`` at 2 and 3;
``BATCH`` records nest them.  Nothing in a replay reads a body, only carries it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ferrymq.storage.engine.records import BATCH, RESTORED, SENT, STORED, Record
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.reading import SealedSegments, decode
from ferrymq.storage.log.segments import segment_path

INLINE_BODY_CHARS = 64
"""Bodies this short (without attributes) stay in place: a reference would not be smaller."""

_ITEMS_AT = {SENT: 4, STORED: 5, RESTORED: 2}
"""Where each body-carrying record kind keeps its item list."""
_BODY_AT = {SENT: 1, STORED: 1, RESTORED: 2}
"""Where the body sits in an item of that kind (its attributes follow it)."""
_NO_ATTRS: dict[str, Any] = {}


class BodyRef(NamedTuple):
    segment: int
    offset: int
    """Where the record's payload starts in the segment file, in bytes (past the frame's head)."""
    length: int
    inner: int
    """Position of the record inside a BATCH, -1 for a record of its own."""
    item: int


def records_without_bodies(sealed: SealedSegments) -> Iterator[Record]:
    """The engine records of sealed segments, sizeable bodies replaced by :class:`BodyRef`."""
    for index, frame, path in sealed.engine_frames():
        yield _strip(decode(frame, path), index, frame.end - len(frame.payload), len(frame.payload), -1)


def _strip(record: Record, segment: int, offset: int, length: int, inner: int) -> Record:
    kind = record[0]
    if kind == BATCH:
        return (BATCH, [_strip(r, segment, offset, length, i) for i, r in enumerate(record[1])])
    at = _ITEMS_AT.get(kind)
    if at is None:
        return record
    body_at = _BODY_AT[kind]
    items = []
    for n, item in enumerate(record[at]):
        body, attrs = item[body_at], item[body_at + 1]
        if len(body) > INLINE_BODY_CHARS or attrs:
            ref = BodyRef(segment, offset, length, inner, n)
            item = (*item[:body_at], ref, _NO_ATTRS, *item[body_at + 2 :])
        items.append(item)
    return (*record[:at], items, *record[at + 1 :])


def resolve_bodies(records: Iterable[Record], directory: Path) -> Iterator[Record]:
    """``records`` (a fold's output) with every :class:`BodyRef` replaced by the body and attributes it names."""
    with _BodyReader(directory) as reader:
        for record in records:
            if record[0] != RESTORED:
                yield record
                continue
            items = []
            for item in record[2]:
                ref = item[2]
                if isinstance(ref, BodyRef):
                    body, attrs = reader.read(ref)
                    item = (*item[:2], body, attrs, *item[4:])
                items.append(item)
            yield (RESTORED, record[1], items)


def body_items(record: Record) -> list[tuple[Any, int]]:
    """Every message item ``record`` stores, as ``(item, where its body sits in it)``, in the order applying the
    record adds them (a BATCH's records one after the other); the message id sits just before the body."""
    kind = record[0]
    if kind == BATCH:
        return [entry for inner in record[1] for entry in body_items(inner)]
    at = _ITEMS_AT.get(kind)
    if at is None:
        return []
    body_at = _BODY_AT[kind]
    return [(item, body_at) for item in record[at]]


class _BodyReader:
    """Reads referenced records back with ``pread``; consecutive references mostly share a record."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._fds: dict[int, int] = {}
        self._last: tuple[tuple[int, int], Record] | None = None

    def __enter__(self) -> _BodyReader:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def read(self, ref: BodyRef) -> tuple[str, dict]:
        key = (ref.segment, ref.offset)
        if self._last is not None and self._last[0] == key:
            record = self._last[1]
        else:
            fd = self._fds.get(ref.segment)
            if fd is None:
                fd = self._fds[ref.segment] = os.open(segment_path(self._directory, ref.segment), os.O_RDONLY)
            record = codec.decode(os.pread(fd, ref.length, ref.offset))
            self._last = (key, record)
        if ref.inner >= 0:
            record = record[1][ref.inner]
        kind = record[0]
        item = record[_ITEMS_AT[kind]][ref.item]
        at = _BODY_AT[kind]
        return item[at], item[at + 1]
