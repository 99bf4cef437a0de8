"""The C allocator's settings for a worker: the message tables' large arrays mapped on their own.

A partition's message table is a set of large arrays that grow as messages arrive (``engine/table.py``). glibc's
malloc serves a block above its mmap threshold with a mapping of its own, which a growing array extends in
place; but it raises that threshold each time such a block is freed (up to 32 MiB), after which the arrays come
from the heap, where each growth copies and leaves the old block as a hole.

The threshold is fixed instead, at 1 MiB, with the trim threshold at twice that (what glibc's own adjustment
would pair with it). Measured in process (a leader filled by 16 clients with batches of ten, RSS growth over the
second half of the fill; CPU per message sent, client and worker together):

| threshold | bytes per message at 1,000,000 | CPU per message |
|---|---|---|
| glibc's own (adjusted) | 154 | 18 to 19 µs |
| 128 KiB fixed | 113 | 25 to 26 µs: the group commit's ~128 KiB buffers are mapped and faulted in anew each time |
| 1 MiB fixed, trim 2 MiB | 112 | 18 to 19 µs |
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""mallopt's parameter numbers (malloc.h)."""
MMAP_THRESHOLD_BYTES = 1024 * 1024
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES


def keep_large_blocks_mapped() -> bool:
    """Fix glibc's mmap and trim thresholds (a no-op, returning False, where the C library is not glibc)."""
    try:
        # The process's own symbols, the C library's among them: find_library("c") would run ``ldconfig -p``
        # in a child process at every worker start.
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
    if not done:
        log.debug("mallopt was refused; large blocks follow the allocator's own thresholds")
    return done
