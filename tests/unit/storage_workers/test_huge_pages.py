"""Which mappings a worker asks huge pages for, and how it asks (the kernel's side is in the functional test)."""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from ferrymq.storage.server.huge_pages import (
    HUGE_PAGE_BYTES,
    MADV_COLLAPSE,
    HugePages,
    Region,
    available,
    collapses,
    regions,
)

MIB = 1024 * 1024


def _mapping(start: int, size: int, perms: str = "rw-p", path: str = "", rss: int | None = None,
             huge: int = 0) -> str:
    head = f"{start:x}-{start + size:x} {perms} 00000000 00:00 0"
    head += f"                          {path}" if path else " "
    rss = size if rss is None else rss
    return "\n".join([head, f"Size:           {size // 1024} kB", f"Rss:            {rss // 1024} kB",
                      f"AnonHugePages:  {huge // 1024} kB", "VmFlags: rd wr mr mw me ac sd"])


DENSE = 0x7F00_0000_0000 + 4096  # not aligned to a huge page: the advice covers the aligned middle only
SMAPS = "\n".join([
    _mapping(DENSE, 64 * MIB),
    _mapping(0x7F10_0000_0000, 8 * MIB, rss=32 * 1024),  # a thread's stack: mostly untouched
    _mapping(0x7F20_0000_0000, 4 * MIB),  # small
    _mapping(0x7F30_0000_0000, 64 * MIB, huge=48 * MIB),  # mostly huge already
    _mapping(0x7F40_0000_0000, 64 * MIB, perms="r--p"),  # read-only
    _mapping(0x7F50_0000_0000, 64 * MIB, perms="rw-s"),  # shared
    _mapping(0x7F60_0000_0000, 64 * MIB, path="[heap]"),
    _mapping(0x7F70_0000_0000, 64 * MIB, path="/usr/lib/libc.so.6"),
])


def test_only_large_dense_private_anonymous_mappings_not_yet_huge_want_huge_pages() -> None:
    found = regions(SMAPS)
    assert [(r.start, r.size) for r in found] == [(DENSE, 64 * MIB), (0x7F10_0000_0000, 8 * MIB),
                                                  (0x7F20_0000_0000, 4 * MIB), (0x7F30_0000_0000, 64 * MIB)]
    assert found[3].huge == 48 * MIB and found[1].rss == 32 * 1024
    assert [r.start for r in found if r.wants_huge_pages()] == [DENSE]


def test_a_pass_collapses_the_aligned_middle_of_each_mapping_and_advises_nothing() -> None:
    calls: list[tuple[int, int, int]] = []

    def madvise(start: int, length: int, advice: int) -> int:
        calls.append((start, length, advice))
        return 0

    pages = HugePages(lambda: madvise, read_smaps=lambda: SMAPS)
    collapsed = pages.run_pass()
    start = DENSE - 4096 + HUGE_PAGE_BYTES
    end = DENSE - 4096 + 64 * MIB
    # no MADV_HUGEPAGE: it would have later page faults in the mapping compact memory on the loop
    assert calls == [(start, end - start, MADV_COLLAPSE)]
    assert collapsed == pages.collapsed_bytes == end - start
    assert pages.passes == 1


def test_a_mapping_the_kernel_refuses_is_counted_by_its_errno_and_the_next_pass_tries_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers = [errno.EINVAL, 0]

    def madvise(start: int, length: int, advice: int) -> int:
        return answers.pop(0)

    pages = HugePages(lambda: madvise, read_smaps=lambda: SMAPS)
    with caplog.at_level(logging.INFO, logger="ferrymq.storage.server.huge_pages"):
        assert pages.run_pass() == 0
        assert pages.run_pass() > 0
    assert "0 MiB collapsed; 1 refused with EINVAL" in caplog.text


def test_whether_the_kernel_collapses_on_request_is_tried_on_one_aligned_huge_page() -> None:
    assert collapses(lambda start, length, advice: 0)
    assert not collapses(lambda start, length, advice: errno.EINVAL)
    probed: list[tuple[int, int, int]] = []
    collapses(lambda *args: probed.append(args) or 0)
    (start, length, advice), = probed
    assert start % HUGE_PAGE_BYTES == 0 and length == HUGE_PAGE_BYTES and advice == MADV_COLLAPSE


def test_only_a_slow_fork_starts_a_pass_and_one_at_a_time() -> None:
    found: list[int] = []

    def find_madvise() -> Callable[[int, int, int], int]:
        found.append(1)
        return lambda *args: 0

    pages = HugePages(find_madvise, slow_fork_seconds=0.02, read_smaps=lambda: SMAPS)
    pages.after_fork(0.019)
    pages.join()
    # the kernel is not even probed for a fast fork
    assert pages.passes == 0 and found == []
    pages.after_fork(0.02)
    pages.join(5)
    pages.after_fork(0.03)
    pages.join(5)
    assert pages.passes == 2 and found == [1]
    nothing = HugePages(lambda: None, read_smaps=lambda: SMAPS)
    nothing.after_fork(1.0)
    nothing.join()
    assert nothing.passes == 0


def test_an_unreadable_smaps_is_a_pass_that_asks_nothing() -> None:
    def unreadable() -> str:
        raise PermissionError("no")

    calls: list[int] = []
    assert HugePages(lambda: lambda *args: calls.append(1) or 0, read_smaps=unreadable).run_pass() == 0
    assert calls == []


def test_huge_pages_are_off_where_the_kernel_says_never_or_says_nothing(tmp_path: Path) -> None:
    setting = tmp_path / "enabled"
    setting.write_text("always [madvise] never\n")
    assert available(setting)
    setting.write_text("always madvise [never]\n")
    assert not available(setting)
    assert not available(tmp_path / "missing")


def test_a_region_s_size_is_its_span() -> None:
    assert Region(0, 3 * MIB, 0, 0).size == 3 * MIB
