"""A checkpoint's chunks mapped into a message table's columns at a load, then copied into memory of the process.

From version 4 each chunk of a checkpoint file lies on pages of its own (``checkpoint_chain``), so a load can map it
where it belongs in the column it fills (``engine.columns``: a reservation of address space), ``MAP_FIXED |
MAP_PRIVATE``: the load then neither copies it nor has the kernel find and zero memory for it, and until a row is
written its page is the page cache's (a row written is the process's own copy; the file never changes).

A file stays allocated on disk while any of it is mapped, though, and a checkpoint's files are replaced as new ones
are written: once the state is in use (:func:`settle`), :func:`copy_mapped` puts memory of the process's own,
holding the same bytes, in place of what was mapped, a step at a time, which the worker paces on its loop
(``ferrymq.storage.server.mapped_columns``).
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import threading
import weakref
from collections.abc import Iterable
from typing import Any

from ferrymq.storage.engine.columns import MAP_NORESERVE, address, huge_page_up

_lock = threading.Lock()
"""Loads off the loop map files while the loop copies what earlier ones mapped."""
_loading: weakref.WeakKeyDictionary[mmap.mmap, list[list[int]]] = weakref.WeakKeyDictionary()
"""Each reservation's spans ``[start, end)`` (bytes from its start) that a file's pages were mapped over, while the
state they belong to is still being built (a load and its replay may run off the loop, writing rows): not to be
copied until :func:`settle` says the state is in use. A reservation unmapped (its load failed, its table gone)
leaves with its spans."""
_mapped: weakref.WeakKeyDictionary[mmap.mmap, list[list[int]]] = weakref.WeakKeyDictionary()
"""The same, of states in use, not yet copied (:func:`copy_mapped`)."""

PROT_READ_WRITE = mmap.PROT_READ | mmap.PROT_WRITE
MAP_FIXED = 0x10
MREMAP_MAYMOVE, MREMAP_FIXED = 1, 2


@functools.cache
def _libc() -> Any:
    # ``PyDLL``: the calls keep the interpreter's lock; each is a few microseconds.
    libc = ctypes.PyDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64]
    libc.mremap.restype = ctypes.c_void_p
    libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    return libc


def _failed(call: str, at: int) -> OSError:
    code = ctypes.get_errno()
    return OSError(code, f"{call} at {at:#x}: {os.strerror(code)}")


def _map_fixed(at: int, length: int, fd: int, offset: int) -> None:
    if _libc().mmap(at, length, PROT_READ_WRITE, mmap.MAP_PRIVATE | MAP_FIXED, fd, offset) != at:
        raise _failed("mmap", at)


def _replace_with_copy(at: int, length: int) -> None:
    """Put anonymous memory holding the same bytes in place of ``[at, at + length)``, in one step for every other
    thread: the copy is made aside, then moved over (``mremap``), so a reader never sees the span empty."""
    libc = _libc()
    aside = libc.mmap(None, length, PROT_READ_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    if aside in (None, ctypes.c_void_p(-1).value):
        raise _failed("mmap", 0)
    ctypes.memmove(aside, at, length)
    if libc.mremap(aside, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, at) != at:
        error = _failed("mremap", at)
        libc.munmap(ctypes.c_void_p(aside), ctypes.c_size_t(length))
        raise error


def map_file(target: memoryview, at: int, fd: int, offset: int, length: int) -> None:
    """Map ``length`` bytes of file ``fd`` from ``offset`` over bytes ``[at, at + length)`` of ``target`` (bytes at
    the start of a reservation: :func:`loaded`), privately: a row written there is the process's own copy, the
    file unchanged. All three are whole pages; raises ``OSError`` where the file cannot be mapped."""
    region = target.obj
    if not isinstance(region, mmap.mmap) or address(memoryview(region)) != address(target):
        raise ValueError("not the start of a reservation")
    if (at | offset | length) % mmap.PAGESIZE or at < 0 or at + length > len(region):
        raise ValueError(f"bytes {at}-{at + length} of a reservation of {len(region)}, from {offset}")
    _map_fixed(address(target) + at, length, fd, offset)
    with _lock:
        spans = _loading.setdefault(region, [])
        if spans and spans[-1][1] == at:
            spans[-1][1] = at + length
        else:
            spans.append([at, at + length])


def settle(views: Iterable[memoryview]) -> None:
    """The columns ``views`` are of a state now in use, written only by the thread that calls
    :func:`copy_mapped`: what files were mapped into them may be copied."""
    with _lock:
        for view in views:
            spans = _loading.pop(view.obj, None)  # type: ignore[arg-type]
            if spans:
                _mapped.setdefault(view.obj, []).extend(spans)  # type: ignore[arg-type]


def mapped_bytes() -> int:
    """Bytes of files mapped into the reservations of states in use (:func:`settle`), not yet copied."""
    with _lock:
        return sum(end - start for spans in _mapped.values() for start, end in spans)


def copy_mapped(budget: int) -> int:
    """Put memory of the process's own, holding the same bytes, in place of about ``budget`` bytes of what files
    were mapped into reservations (on to the next huge-page boundary); returns the bytes still mapped. On the
    thread that writes the columns (the worker's loop): a row written elsewhere between a span's copy and its move
    would be lost."""
    budget = max(mmap.PAGESIZE, budget // mmap.PAGESIZE * mmap.PAGESIZE)
    with _lock:
        work = [(region, spans) for region, spans in _mapped.items() if spans]
    for region, spans in work:
        base = address(memoryview(region))
        while spans and budget > 0:
            start, end = spans[0]
            # Each copy becomes a mapping of its own, which the kernel does not merge with its neighbours: one that
            # ends on a huge-page boundary leaves every whole huge page of the column inside one mapping, where the
            # huge-pages pass can collapse it (``server.huge_pages``).
            stop = min(end, huge_page_up(base + start + budget) - base)
            _replace_with_copy(base + start, stop - start)
            budget -= stop - start
            with _lock:
                if stop == end:
                    spans.pop(0)
                else:
                    spans[0][0] = stop
        if budget <= 0:
            break
    return mapped_bytes()
