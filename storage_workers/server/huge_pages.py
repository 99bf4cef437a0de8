"""Huge pages for a worker's large arrays, so that the fork of a checkpoint taken while serving stays short.

A fork holds the worker's loop while the kernel copies its page tables: about 16 ms per GB of memory mapped with
4 KiB pages, 0.6 ms per GB with 2 MiB ones (measured here). At ten million messages a worker maps about 1.1 GB,
nearly all of it the message table's columns and index arrays, and its forks held the loop 70-132 ms.

glibc's ``glibc.malloc.hugetlb=1`` tunable would give every allocation huge pages, the interpreter's own heap too:
an idle worker's RSS went from 58 to 97-149 MB. Asking for them mapping by mapping is what this module does. The
arrays grow by reallocation, which moves them and splits their huge pages, so asking once is not enough: once the
child of a checkpoint whose fork held the loop :data:`SLOW_FORK_SECONDS` or more has exited (while it lives, the
pages are shared with it, and collapsing them would copy them), a thread reads ``/proc/self/smaps`` and, for every
private anonymous mapping of :data:`MIN_REGION_BYTES` or more that is dense (its resident pages cover at least
:data:`DENSE_FRACTION` of it, so thread stacks and reserved but untouched memory are left alone) and not mostly
huge pages yet, asks the kernel to collapse it into huge pages (``madvise(MADV_COLLAPSE)``, Linux 6.1 and later).
A collapse copies the pages: about 1.5-3 ms of CPU per MiB, in that thread, and not again while the mapping stays
where it is. The mappings are not advised ``MADV_HUGEPAGE``: with the kernel's usual ``defrag`` setting that would
have every later page fault in them (an array growing) compact memory to find a huge page, on the loop.

The message table's columns (``engine.columns``) are the exception: each reserves far more address space than its
rows fill, so smaps shows a sparse mapping; the tables name where their rows lie (:func:`.columns.dense_spans`),
and those spans are asked for as dense mappings are. They never move, so what a pass collapses stays collapsed;
each pass asks again for all of them, which the kernel answers at once for what is already huge.

Nothing is asked where the kernel's setting is ``never``, or outside Linux.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import mmap
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ferrymq.storage.engine import columns

log = logging.getLogger(__name__)

HUGE_PAGE_BYTES = columns.HUGE_PAGE_BYTES
MIN_REGION_BYTES = 8 * 1024 * 1024
DENSE_FRACTION = 0.9
"""A mapping whose resident pages cover less than this share of it is left alone: collapsing it would make its
untouched pages resident."""
MOSTLY_HUGE_FRACTION = 0.5
SLOW_FORK_SECONDS = 0.02
"""A fork that held the loop this long starts a pass once its child exits (about 1.2 GB of 4 KiB pages)."""
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

    def __init__(self, find_madvise: Callable[[], Callable[[int, int, int], int] | None], *,
                 slow_fork_seconds: float = SLOW_FORK_SECONDS,
                 read_smaps: Callable[[], str] = lambda: SMAPS.read_text(),
                 dense_spans: Callable[[], Iterable[tuple[int, int]]] = columns.dense_spans) -> None:
        """``find_madvise`` gives ``madvise`` (returning 0 or the errno the call failed with), or None where no
        huge pages are to be asked for; it is called at the first slow fork, not before: most workers never
        fork slowly, and finding out whether the kernel collapses costs a mapping of 4 MiB."""
        self.slow_fork_seconds = slow_fork_seconds
        self.passes = 0
        """Passes finished."""
        self.collapsed_bytes = 0
        """Bytes of mappings collapsed into huge pages, over every pass."""
        self._read_smaps = read_smaps
        self._dense_spans = dense_spans
        self._find_madvise = find_madvise
        self._thread: threading.Thread | None = None

    @classmethod
    def for_this_process(cls) -> HugePages:
        return cls(_libc_madvise)

    @functools.cached_property
    def _madvise(self) -> Callable[[int, int, int], int] | None:
        return self._find_madvise()

    @property
    def asks(self) -> bool:
        """Whether huge pages are asked for at all (not where the kernel gives none or cannot collapse)."""
        return self._madvise is not None

    def after_fork(self, held_seconds: float) -> None:
        """The child of a checkpoint whose fork held the loop ``held_seconds`` has exited: start a pass if that
        fork was slow and none is running."""
        if held_seconds < self.slow_fork_seconds or not self.asks:
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
            found = regions(self._read_smaps())
            # The message tables' columns are mappings far larger than their rows (``engine.columns``): smaps sees
            # them as sparse, so their rows are named by the tables.
            found += [Region(start, start + size, size, 0) for start, size in self._dense_spans()]
            wanted = [r for r in found if r.wants_huge_pages()]
        except OSError as exc:
            log.debug("huge pages: %s unreadable (%s)", SMAPS, exc)
            return 0
        collapsed, refused = self._ask(wanted)
        self.passes += 1
        self.collapsed_bytes += collapsed
        if wanted:
            log.info("huge pages asked for %d mappings (%.0f MiB), %.0f MiB collapsed%s, in %.2f s (%.2f s of CPU)",
                     len(wanted), sum(r.size for r in wanted) / 2**20, collapsed / 2**20,
                     "".join(f"; {n} refused with {name}" for name, n in sorted(refused.items())),
                     time.perf_counter() - started, time.thread_time() - spent)
        return collapsed

    def _ask(self, wanted: Iterable[Region]) -> tuple[int, dict[str, int]]:
        """The bytes collapsed, and how many mappings the kernel refused, by errno name."""
        assert self._madvise is not None
        collapsed = 0
        refused: dict[str, int] = {}
        for region in wanted:
            start, end = columns.huge_page_up(region.start), region.end // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES
            if end <= start:
                continue
            # The mapping may have moved since smaps was read (an array reallocated): the kernel refuses a range
            # that is no longer one mapping, and the next pass finds it where it is.
            code = self._madvise(start, end - start, MADV_COLLAPSE)
            if code == 0:
                collapsed += end - start
            else:
                name = errno.errorcode.get(code, str(code))
                refused[name] = refused.get(name, 0) + 1
        return collapsed, refused


@functools.cache
def _libc_madvise() -> Callable[[int, int, int], int] | None:
    """``madvise`` returning 0 or the errno it failed with; None where there is none, huge pages are off, or the
    kernel cannot collapse on request (tried once per process, on a mapping of its own)."""
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

    return madvise if collapses(madvise) else None


def collapses(madvise: Callable[[int, int, int], int]) -> bool:
    """Whether ``madvise(MADV_COLLAPSE)`` collapses a dense anonymous mapping: tried on one of two huge pages' size,
    which holds a whole aligned huge page wherever it is mapped."""
    probe = mmap.mmap(-1, 2 * HUGE_PAGE_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        probe.write(b"\1" * len(probe))
        first = ctypes.c_char.from_buffer(probe)
        aligned = columns.huge_page_up(ctypes.addressof(first))
        del first  # the mapping cannot be closed while a ctypes object points into it
        code = madvise(aligned, HUGE_PAGE_BYTES, MADV_COLLAPSE)
    finally:
        probe.close()
    if code != 0:
        log.info("huge pages: this kernel does not collapse on request (MADV_COLLAPSE: %s); forks stay as they are",
                 errno.errorcode.get(code, code))
    return code == 0
