"""What the fork of a checkpoint taken while serving holds the loop for, before and after huge pages are asked for.

    python benchmarks/fork_bench.py [--messages 3000000]

Fills one Engine in process with ``--messages`` messages as the front end sends them (bodies dropped from memory,
as a worker keeps them in its log: ``checkpoint_bench.send``), then forks five times (each child exits at once) and
prints the shortest and longest fork and the RSS. Then it runs one pass of ``ferrymq.storage.server.huge_pages``
(what a worker does after a slow fork), prints what it collapsed and its CPU, and forks and measures again. It
prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from checkpoint_bench import KEY, send

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.server.huge_pages import SMAPS, HugePages, regions


def forks(times: int = 5) -> tuple[float, float]:
    """The shortest and longest fork, in ms."""
    took = []
    for _ in range(times):
        started = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        took.append((time.perf_counter() - started) * 1000)
        os.waitpid(pid, 0)
    return min(took), max(took)


def memory() -> str:
    found = regions(SMAPS.read_text())
    rss = int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return (f"RSS {rss / 2**20:,.0f} MiB, of it in huge pages {sum(r.huge for r in found) / 2**20:,.0f} MiB "
            f"(private anonymous mappings)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3_000_000)
    args = parser.parse_args()
    engine = Engine(ManualClock(), KEY)
    started = time.perf_counter()
    send(engine, args.messages, "m")
    print(f"{args.messages:,} messages stored in {time.perf_counter() - started:.1f} s; {memory()}")
    low, high = forks()
    print(f"fork with 4 KiB pages: {low:.1f}-{high:.1f} ms")
    pages = HugePages.for_this_process()
    if not pages.asks:
        print("this kernel gives no transparent huge pages, or cannot collapse on request: nothing more to measure")
        return
    started, cpu = time.perf_counter(), time.process_time()
    collapsed = pages.run_pass()
    print(f"huge pages: {collapsed / 2**20:,.0f} MiB collapsed in {time.perf_counter() - started:.2f} s "
          f"({time.process_time() - cpu:.2f} s of CPU); {memory()}")
    low, high = forks()
    print(f"fork after: {low:.1f}-{high:.1f} ms")
    engine.partition.table  # noqa: B018 - the state stays alive until here


if __name__ == "__main__":
    main()
