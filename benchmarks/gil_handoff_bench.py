"""How long a worker's event loop waits for the interpreter's lock while a thread of its own reads the log for a
catching-up follower, by the interpreter's switch interval.

    python benchmarks/gil_handoff_bench.py [--records 60000] [--seconds 10] [--intervals 0.005,0.001]
                                           [--hogs 1] [--rounds 2]

A uvloop loop runs a 50 ms tick that records how late it woke (as the worker's loop-lag monitor does) and a
ping-pong over a socket pair (a worker's loop answers requests meanwhile), while FETCHes of 1 MiB are read from
a log of ``--records`` 1 KiB records in a thread, back to back, as the leader reads for a follower catching up.
``--hogs`` processes spin meanwhile, so that the machine is as saturated as during a catch-up in the stack.
Each switch interval runs ``--rounds`` times, alternating. Prints, for each, the worst and the 99th percentile
of the tick's lateness, the ping-pongs answered and the MiB/s the reads moved.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import uvloop
from fetch_bench import FETCH_BYTES, write_log

from ferrymq.storage.log.reading import LogReader, SegmentIndexes
from ferrymq.storage.log.segments import SegmentInfo

TICK_SECONDS = 0.05


def _spin(stop_at: float) -> None:
    while time.monotonic() < stop_at:
        pass


def _fetch(directory: Path, segments: list[SegmentInfo], indexes: SegmentIndexes, offset: int) -> tuple[int, int]:
    """One FETCH as the leader reads it: records from ``offset`` until 1 MiB of payload; (next offset, bytes)."""
    size = 0
    with LogReader(directory, segments, offset, indexes) as reader:
        for _, at, payload in reader:
            size += len(payload)
            offset = at + 1
            if size >= FETCH_BYTES:
                break
    return offset, size


async def _run(directory: Path, segments: list[SegmentInfo], seconds: float) -> tuple[list[float], int, int]:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    late: list[float] = []
    pongs = 0
    moved = 0

    async def tick() -> None:
        while loop.time() < end:
            due = loop.time() + TICK_SECONDS
            await asyncio.sleep(TICK_SECONDS)
            late.append(loop.time() - due)

    async def ping_pong() -> None:
        nonlocal pongs
        left, right = socket.socketpair()
        reader_l, writer_l = await asyncio.open_connection(sock=left)
        reader_r, writer_r = await asyncio.open_connection(sock=right)
        try:
            while loop.time() < end:
                writer_l.write(b"x" * 64)
                await reader_r.readexactly(64)
                writer_r.write(b"y" * 64)
                await reader_l.readexactly(64)
                pongs += 1
                await asyncio.sleep(0.001)
        finally:
            writer_l.close()
            writer_r.close()

    async def fetches() -> None:
        nonlocal moved
        indexes = SegmentIndexes()
        offset = 1
        while loop.time() < end:
            if offset >= segments[-1].end_offset:
                offset = 1
            offset, size = await asyncio.to_thread(_fetch, directory, segments, indexes, offset)
            moved += size

    await asyncio.gather(tick(), ping_pong(), fetches())
    return late, pongs, moved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--intervals", default="0.005,0.001", help="switch intervals to compare, in seconds")
    parser.add_argument("--hogs", type=int, default=1, help="processes spinning meanwhile")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    intervals = [float(x) for x in args.intervals.split(",")]
    with tempfile.TemporaryDirectory(prefix="ferrymq-gil-") as tmp:
        directory = Path(tmp)
        segments = write_log(directory, args.records)
        results: dict[float, list[tuple[list[float], int, int]]] = {i: [] for i in intervals}
        for _ in range(args.rounds):
            for interval in intervals:
                sys.setswitchinterval(interval)
                hogs = [multiprocessing.Process(target=_spin, args=(time.monotonic() + args.seconds + 1,))
                        for _ in range(args.hogs)]
                for hog in hogs:
                    hog.start()
                try:
                    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                        results[interval].append(runner.run(_run(directory, segments, args.seconds)))
                finally:
                    for hog in hogs:
                        hog.join()
        print(f"{args.records:,} records, {args.seconds:.0f} s per run, {args.hogs} spinning process(es), "
              f"{args.rounds} round(s)")
        for interval, runs in results.items():
            for late, pongs, moved in runs:
                ranked = sorted(late)
                p99 = ranked[int(len(ranked) * 0.99)] if ranked else 0.0
                print(f"  switch interval {interval * 1000:.1f} ms: tick late worst {max(late) * 1000:6.1f} ms, "
                      f"p99 {p99 * 1000:5.1f} ms, median {statistics.median(late) * 1000:4.1f} ms; "
                      f"{pongs / args.seconds:6,.0f} ping-pongs/s; reads {moved / 2**20 / args.seconds:6.1f} MiB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
