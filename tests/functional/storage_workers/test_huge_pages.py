"""Huge pages asked for on this machine's kernel: a large dense array gets them, a large mapping mostly untouched
(a thread's stack, memory reserved ahead) is left as it is, so its resident memory does not grow."""

from __future__ import annotations

import ctypes
import mmap
from array import array
from pathlib import Path

import pytest

from ferrymq.storage.engine import PartitionState, columns
from ferrymq.storage.engine.table import MessageTable
from ferrymq.storage.log import mapped_chunks
from ferrymq.storage.log.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from ferrymq.storage.server.huge_pages import SMAPS, HugePages, regions

MIB = 1024 * 1024


def _overlapping(start: int, end: int) -> tuple[int, int]:
    """Resident and huge-page bytes of the mappings overlapping ``[start, end)``."""
    found = [r for r in regions(SMAPS.read_text()) if r.start < end and r.end > start]
    return sum(r.rss for r in found), sum(r.huge for r in found)


def _resident_bytes(start: int, length: int) -> int:
    """Resident bytes of exactly ``[start, start + length)`` (``mincore``): the kernel merges neighbouring
    reservations of the same flags into one mapping, so smaps' figure for the mapping can hold other tables'
    rows, left by earlier tests in this process."""
    libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols, as the worker finds libc's
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    pages = -(-length // mmap.PAGESIZE)
    vector = (ctypes.c_ubyte * pages)()
    if libc.mincore(start, pages * mmap.PAGESIZE, vector) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    return sum(byte & 1 for byte in bytes(vector)) * mmap.PAGESIZE


def test_a_dense_array_gets_huge_pages_and_a_sparse_mapping_stays_as_it_was() -> None:
    pages = HugePages.for_this_process()
    dense = array("q", range(48 * MIB // 8))
    sparse = mmap.mmap(-1, 48 * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        sparse[0] = 1
        start, count = dense.buffer_info()
        sparse_start = next(r.start for r in regions(SMAPS.read_text()) if r.size == 48 * MIB and r.rss < MIB)
        sparse_rss = _overlapping(sparse_start, sparse_start + 48 * MIB)[0]
        if not pages.asks:
            pytest.skip("this kernel gives no huge pages, or cannot collapse on request (MADV_COLLAPSE, Linux 6.1)")
        pages.run_pass()
        assert _overlapping(start, start + count * 8)[1] >= 32 * MIB
        assert _overlapping(sparse_start, sparse_start + 48 * MIB) == (sparse_rss, 0)
        # and the array is still what it was
        assert dense == array("q", range(48 * MIB // 8))
    finally:
        sparse.close()


def test_a_message_tables_rows_get_huge_pages_and_the_rest_of_its_columns_reservations_stay_untouched() -> None:
    pages = HugePages.for_this_process()
    if not pages.asks:
        pytest.skip("this kernel gives no huge pages, or cannot collapse on request (MADV_COLLAPSE, Linux 6.1)")
    # given a table of 1.5 M rows, its ``sent`` column 12 MiB of a reservation of 2 GiB
    table = MessageTable()
    rows = 3 * MIB // 2
    table.extra.extend([None] * rows)
    table.sent.cast("B")[:rows * 8] = array("q", range(rows)).tobytes()
    start = columns.address(table.sent)
    # when a pass runs
    pages.run_pass()
    # then the column's rows are huge pages, and its reservation holds no more than them resident
    assert _overlapping(start, start + rows * 8)[1] >= 8 * MIB
    assert rows * 8 <= _resident_bytes(start, table.sent.nbytes) <= rows * 8 + 4 * MIB
    # and the rows are what they were
    assert table.rows_of("sent").tolist() == list(range(rows))


def test_a_column_a_start_mapped_and_copied_gets_huge_pages(tmp_path: Path) -> None:
    pages = HugePages.for_this_process()
    if not pages.asks:
        pytest.skip("this kernel gives no huge pages, or cannot collapse on request (MADV_COLLAPSE, Linux 6.1)")
    # given a checkpoint whose table's ``sent`` column is 12 MiB
    state = PartitionState()
    rows = 3 * MIB // 2
    state.table.extra.extend([None] * rows)
    state.table.sent.cast("B")[:rows * 8] = array("q", range(rows)).tobytes()
    write_checkpoint(tmp_path, Checkpoint(1, [], {}, state))
    del state
    # when a start loads it (its chunks mapped) and then copies what it mapped into memory of its own
    found = read_checkpoint(tmp_path)
    assert found is not None
    table = found.state.table
    mapped_chunks.settle(table.column_views())
    while mapped_chunks.copy_mapped(3 * MIB // 2):
        pass
    # then a pass gives the column's rows huge pages: the copies did not cut them into mappings too small for one
    pages.run_pass()
    start = columns.address(table.sent)
    assert _overlapping(start, start + rows * 8)[1] >= 8 * MIB
    assert table.rows_of("sent").tolist() == list(range(rows))
