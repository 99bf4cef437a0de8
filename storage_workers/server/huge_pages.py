"""Huge pages for a worker's large arrays, so that the fork of a checkpoint taken while serving stays short.

A fork holds the worker's loop while the kernel copies its page tables: about 16 ms per GB of memory mapped with
4 KiB pages, 0.6 ms per GB with 2 MiB ones (measured here). At ten million messages a worker maps about 1.1 GB,
nearly all of it the message table's columns and index arrays, and its forks held the loop 70-132 ms.

glibc's ``glibc.malloc.hugetlb=1`` tunable would give every allocation huge pages, the interpreter's own heap too:
an idle worker's RSS went from 58 to 97-149 MB. Asking for them mapping by mapping is what this module does. The
arrays grow by reallocation, which moves them and splits their huge pages, so asking once is not enough: after a
checkpoint whose fork held the loop :data:`SLOW_FORK_SECONDS` or more, a thread reads ``/proc/self/smaps`` and,
for every private anonymous mapping of :data:`MIN_REGION_BYTES` or more that is dense (its resident pages cover at
least :data:`DENSE_FRACTION` of it, so thread stacks and reserved but untouched memory are left alone) and not
mostly huge pages yet, asks for them: ``madvise(MADV_HUGEPAGE)``, then ``madvise(MADV_COLLAPSE)`` (Linux 6.1 and
later; where it is missing, khugepaged collapses the advised mappings in its own time). A collapse copies the pages:
about 2 ms of CPU per MiB, in that thread, and not again while the mapping stays where it is.

Nothing is asked where the kernel's setting is ``never``, or outside Linux.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

HUGE_PAGE_BYTES = 2 * 1024 * 1024
MIN_REGION_BYTES = 8 * 1024 * 1024
DENSE_FRACTION = 0.9
"""A mapping whose resident pages cover less than this share of it is left alone: collapsing it would make its
untouched pages resident."""
MOSTLY_HUGE_FRACTION = 0.5
SLOW_FORK_SECONDS = 0.02
"""A fork that held the loop this long starts a pass (a fork of about 1.2 GB of 4 KiB pages)."""
MADV_HUGEPAGE = 14
MADV_COLLAPSE = 25
THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")
SMAPS = Path("/proc/self/smaps")


@dataclass(frozen=True)
class Region:
    """A private anonymous mapping, with what of it is resident and what of that is huge pages (bytes)."""

    start: int
    end: int
    rss: int
    huge: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def wants_huge_pages(self) -> bool:
        return (self.size >= MIN_REGION_BYTES and self.rss >= DENSE_FRACTION * self.size
                and self.huge < MOSTLY_HUGE_FRACTION * self.size)


def regions(smaps: str) -> list[Region]:
    """The private, writable, anonymous mappings in the text of ``/proc/<pid>/smaps`` (not the heap, the stack or
    any named mapping)."""
    found: list[Region] = []
    current: list[int] | None = None
    for line in smaps.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0].endswith(":"):
            if current is not None and fields[0] in ("Rss:", "AnonHugePages:") and len(fields) >= 2:
                current[2 if fields[0] == "Rss:" else 3] = int(fields[1]) * 1024
            continue
        if current is not None:
            found.append(Region(*current))
            current = None
        span, perms = fields[0], fields[1] if len(fields) > 1 else ""
        anonymous = len(fields) == 5 or (len(fields) > 5 and fields[5] == "")
        if anonymous and perms.startswith("rw") and perms.endswith("p") and "-" in span:
            low, high = span.split("-", 1)
            current = [int(low, 16), int(high, 16), 0, 0]
    if current is not None:
        found.append(Region(*current))
    return found


def available(setting: Path = THP_SETTING) -> bool:
    """Whether the kernel gives transparent huge pages to mappings that ask (``always`` or ``madvise``)."""
    try:
        return "[never]" not in setting.read_text()
    except OSError:
        return False


class HugePages:
    """Asks for huge pages for the process's large dense mappings, in a thread, after a slow fork (module
    docstring). One per process: the mappings are the process's, whichever partition's checkpoint forked."""

    def __init__(self, madvise: Callable[[int, int, int], int] | None, *,
                 slow_fork_seconds: float = SLOW_FORK_SECONDS,
                 read_smaps: Callable[[], str] = lambda: SMAPS.read_text()) -> None:
        """``madvise`` returns 0 or the errno the call failed with; None: no huge pages are asked for."""
        self.slow_fork_seconds = slow_fork_seconds
        self.passes = 0
        """Passes finished."""
        self.collapsed_bytes = 0
        """Bytes of mappings collapsed into huge pages, over every pass."""
        self._read_smaps = read_smaps
        self._madvise = madvise
        self.collapsing = True
        """False once the kernel refused MADV_COLLAPSE as unknown (before Linux 6.1): advice alone from then."""
        self._thread: threading.Thread | None = None

    @classmethod
    def for_this_process(cls) -> HugePages:
        return cls(_libc_madvise())

    def after_fork(self, held_seconds: float) -> None:
        """A checkpoint's fork held the loop ``held_seconds``: start a pass if that was slow and none is running."""
        if held_seconds < self.slow_fork_seconds or self._madvise is None:
            return
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self.run_pass, name="huge-pages", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def run_pass(self) -> int:
        """Ask for huge pages for every mapping that wants them; returns the bytes collapsed."""
        started = time.perf_counter()
        spent = time.thread_time()
        try:
            wanted = [r for r in regions(self._read_smaps()) if r.wants_huge_pages()]
        except OSError as exc:
            log.debug("huge pages: %s unreadable (%s)", SMAPS, exc)
            return 0
        collapsed = self._ask(wanted)
        self.passes += 1
        self.collapsed_bytes += collapsed
        if wanted:
            log.info("huge pages asked for %d mappings (%.0f MiB), %.0f MiB collapsed, in %.2f s (%.2f s of CPU)",
                     len(wanted), sum(r.size for r in wanted) / 2**20, collapsed / 2**20,
                     time.perf_counter() - started, time.thread_time() - spent)
        return collapsed

    def _ask(self, wanted: Iterable[Region]) -> int:
        assert self._madvise is not None
        collapsed = 0
        for region in wanted:
            start = -(-region.start // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
            end = region.end // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES
            if end <= start:
                continue
            # The mapping may be gone or moved by now (an array reallocated): the kernel refuses a range that is
            # not mapped (ENOMEM), and nothing is lost by that.
            if self._madvise(start, end - start, MADV_HUGEPAGE) != 0 or not self.collapsing:
                continue
            code = self._madvise(start, end - start, MADV_COLLAPSE)
            if code == 0:
                collapsed += end - start
            elif code == errno.EINVAL:
                self.collapsing = False
                log.info("huge pages: this kernel cannot collapse on request (MADV_COLLAPSE); khugepaged will")
        return collapsed


def _libc_madvise() -> Callable[[int, int, int], int] | None:
    """``madvise`` returning 0 or the errno it failed with; None where there is none or huge pages are off."""
    if not available():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.madvise
    except (OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    call.restype = ctypes.c_int

    def madvise(start: int, length: int, advice: int) -> int:
        return 0 if call(start, length, advice) == 0 else ctypes.get_errno()

    return madvise
