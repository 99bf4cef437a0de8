"""Fixed-width columns in reserved address space: they grow without moving, and can take pages of a file.

A column is a typed ``memoryview`` over a private anonymous mapping that reserves room for
:data:`RESERVED_ROWS` rows at once (``MAP_NORESERVE``: address space, not memory). Pages are given to it by the
kernel as rows are first written, so a column grows without being reallocated or copied, where an ``array``
copies itself (or asks ``mremap``) as it grows, and could not hold memory it did not allocate. That is what a start
that maps its checkpoint in place needs (``docs/design/storage-at-scale.md``, step 9): an array's chunks mapped
over the reservation where they belong. Reading and writing a row by index costs what an ``array``'s does.

Where the kernel refuses the reservation (strict overcommit accounting, ``vm.overcommit_memory=2``), smaller ones
are asked for, and a table whose rows outgrow its columns moves to bigger ones (:func:`grown`): a copy, as an
``array`` makes.

A start maps the chunks of its checkpoint into the columns where they belong (``ferrymq.storage.log.mapped_chunks``),
so that a load neither copies them nor has the kernel find and zero memory for them.

A mapping this large is sparse, so the huge-pages pass (``ferrymq.storage.server.huge_pages``) would pass over it:
:func:`dense_spans` tells it where the rows of every live column are.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
import threading
import weakref
from array import array
from collections.abc import Iterable, Iterator
from typing import Protocol

RESERVED_ROWS = 1 << 28
"""Rows a column reserves room for: 2 GiB of address space for a column of 8 bytes a row."""
MIN_ROWS = 1 << 12
"""The fewest rows a reservation is asked for when bigger ones are refused."""
RELEASE_BYTES = 1 << 20
"""Rows worth more than this are given back to the kernel when a table empties (:func:`release`)."""
HUGE_PAGE_BYTES = 2 * 1024 * 1024
"""What the huge-pages pass collapses columns into, and what copies of mapped columns keep to."""
MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform == "linux" else 0)
"""Linux's value where Python does not name it; elsewhere nothing is asked (the flag's value differs)."""
ITEM_BYTES = {kind: array(kind).itemsize for kind in "bBhHiIlLqQfd"}


class _HasColumns(Protocol):
    def column_spans(self) -> Iterable[tuple[int, int]]: ...


_owners: weakref.WeakSet[_HasColumns] = weakref.WeakSet()
_owners_lock = threading.Lock()
"""The huge-pages pass reads the owners from its thread while the loop adds to them."""


def reserve(kind: str, rows: int = RESERVED_ROWS) -> memoryview:
    """A zeroed column of ``kind`` (an ``array`` typecode; ``"B"`` for bytes) with room for ``rows`` rows or, where
    the kernel refuses that much address space, the most it gives of half as many, then a quarter..."""
    item = ITEM_BYTES[kind]
    while True:
        try:
            region = mmap.mmap(-1, max(rows, 1) * item, flags=mmap.MAP_PRIVATE | MAP_NORESERVE)
        except OSError:
            if rows <= MIN_ROWS:
                raise
            rows //= 2
            continue
        # The view holds the mapping: it is unmapped once the last view of it is gone.
        return memoryview(region).cast(kind)


def grown(column: memoryview, rows: int, needed: int) -> memoryview:
    """A column with room for at least ``needed`` rows holding the first ``rows`` of ``column`` (whose room is
    too small): a reservation of four times what is needed, the rows copied into it."""
    bigger = reserve(column.format, max(4 * needed, MIN_ROWS))
    if len(bigger) < needed:
        raise MemoryError(f"no room for {needed} rows of {column.format!r}")
    bigger[:rows] = column[:rows]
    return bigger


def adopted(kind: str, data: memoryview | bytes | bytearray | array, rows: int) -> memoryview:
    """A column of ``kind`` whose first ``rows`` rows are ``data``'s bytes: the reservation ``data`` lies at the
    start of, when it is one (a checkpoint's chunks read into it: :func:`loaded`), else a new one they are copied
    into."""
    if type(data) is memoryview and isinstance(data.obj, mmap.mmap) and data.nbytes:
        whole = memoryview(data.obj)
        if len(whole) % ITEM_BYTES[kind] == 0 and address(whole) == address(data):
            column = whole.cast(kind)
            if len(column) >= rows:
                return column
    column = reserve(kind, max(RESERVED_ROWS, rows))
    if len(column) < rows:
        raise MemoryError(f"no room for {rows} rows of {kind!r}")
    source = memoryview(data).cast("B")
    column.cast("B")[:source.nbytes] = source
    return column


def loaded(kind: str, nbytes: int) -> memoryview:
    """Zeroed bytes (format ``"B"``) with room for at least ``nbytes`` and for as many rows of ``kind`` as a
    column reserves, for a checkpoint's chunks to be read into; :func:`adopted` then takes them as they are."""
    # Bytes may be a column of 16 a row (a table's ids): room for as many rows as it reserves.
    rows = RESERVED_ROWS * (16 if kind == "B" else 1)
    column = reserve(kind, max(rows, -(-nbytes // ITEM_BYTES[kind])))
    if column.nbytes < nbytes:
        raise MemoryError(f"no room for {nbytes} bytes")
    return column.cast("B")


def release(column: memoryview, rows: int) -> None:
    """Give the pages of the first ``rows`` rows back to the kernel, when worth it: they read as zeros after, or
    as the file whose pages a load mapped there (``log.mapped_chunks``); a table writes every field of a row it
    takes, so either will do."""
    nbytes = rows * column.itemsize
    if nbytes > RELEASE_BYTES:
        region = column.obj
        assert isinstance(region, mmap.mmap)
        region.madvise(mmap.MADV_DONTNEED, 0, min(-(-nbytes // mmap.PAGESIZE) * mmap.PAGESIZE, len(region)))


def address(column: memoryview) -> int:
    """Where ``column``'s first byte is in memory."""
    holder = ctypes.c_char.from_buffer(column)
    try:
        return ctypes.addressof(holder)
    finally:
        del holder


def track(owner: _HasColumns) -> None:
    """Have :func:`dense_spans` ask ``owner`` where its columns' rows are, for as long as it lives."""
    with _owners_lock:
        _owners.add(owner)


def dense_spans() -> Iterator[tuple[int, int]]:
    """``(address, bytes)`` of the rows of every live column: where the huge-pages pass should look."""
    with _owners_lock:
        owners = list(_owners)
    for owner in owners:
        yield from owner.column_spans()


def huge_page_up(address: int) -> int:
    """The first huge-page boundary at or after ``address``."""
    return -(-address // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
