"""The C allocator's settings for a worker: large blocks always mapped on their own.

A partition's message table is a set of large arrays that grow as messages arrive (``engine/table.py``). glibc's
malloc serves a block above its mmap threshold with a mapping of its own, which a growing array can extend in
place; but it raises that threshold each time such a block is freed, after which arrays of tens of megabytes come
from the heap, where each growth copies and leaves the old block as a hole the process keeps. On a worker
holding 100,000 messages and more that cost about 50 B per stored message beside the table's own ~130 B
(measured in process: a leader filled by 16 clients, RSS growth over the second half of the fill). Fixing the
threshold keeps every large block mapped.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3
"""mallopt's parameter number for the threshold (malloc.h)."""
MMAP_THRESHOLD_BYTES = 128 * 1024
"""glibc's own starting value; setting it explicitly is what turns off its adjustment."""


def keep_large_blocks_mapped() -> bool:
    """Fix glibc's mmap threshold (a no-op, returning False, where the C library is not glibc)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    if not done:
        log.debug("mallopt(M_MMAP_THRESHOLD) was refused; large blocks follow the allocator's own threshold")
    return done
