"""What a follower's catch-up from disk costs the leader: 1 MiB FETCHes over a 64 MiB segment, bytes read and MiB/s.

    python benchmarks/fetch_bench.py [--records 60000]

Writes ``--records`` SENT records of about 1 KiB to a log in a temporary directory, then reads it from offset 1
to the end as a follower's FETCHes do (each read stops after 1 MiB of payload), twice: with the log's shared
segment index (what the leader does), and with a fresh index per FETCH (every read walks its segment from the
start, roughly the cost before the index existed; before it, each FETCH read its whole segment). Prints the
payload moved, the bytes read from disk, and the rate.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

from ferrymq.storage.engine.records import SENT
from ferrymq.storage.log.reading import LogReader, SegmentIndexes
from ferrymq.storage.log.segments import SegmentInfo
from ferrymq.storage.log.writer import LogWriter

FETCH_BYTES = 1 << 20


def write_log(directory: Path, records: int) -> list[SegmentInfo]:
    async def run() -> list[SegmentInfo]:
        writer = LogWriter(directory)
        for seq in range(1, records + 1):
            item = [str(uuid.UUID(int=seq)), "b" * 1000, {}, "md5", None, 0, {}]
            writer.append((SENT, "q", 1_700_000_000_000, seq, [item]), 1)
            if seq % 100 == 0:
                await writer.flush()
        await writer.close()
        return list(writer.segments)

    return asyncio.run(run())


def catch_up(directory: Path, segments: list[SegmentInfo], shared: bool) -> tuple[int, int, float]:
    indexes = SegmentIndexes()
    offset, moved, read = 1, 0, 0
    started = time.perf_counter()
    while offset < segments[-1].end_offset:
        reader = LogReader(directory, segments, offset, indexes if shared else SegmentIndexes())
        size = 0
        with reader:
            for _, at, payload in reader:
                size += len(payload)
                offset = at + 1
                if size >= FETCH_BYTES:
                    break
        moved += size
        read += reader.bytes_read
    return moved, read, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=60_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ferrymq-fetch-") as tmp:
        directory = Path(tmp)
        segments = write_log(directory, args.records)
        print(f"log: {sum(s.size for s in segments) / 2**20:.0f} MiB in {len(segments)} segment(s)")
        for shared, name in ((True, "shared segment index"), (False, "walk from the segment's start")):
            moved, read, seconds = catch_up(directory, segments, shared)
            print(f"  {name:30} payload {moved / 2**20:.0f} MiB, read {read / 2**20:,.0f} MiB, "
                  f"{seconds:.2f} s, {moved / 2**20 / seconds:,.0f} MiB/s")


if __name__ == "__main__":
    main()
