"""What compaction costs a worker per message, in process: the CPU that the requests' own figures leave out.

    python benchmarks/compaction_bench.py [--messages 200000] [--kept 0,0.5] [--segment-mib 16]

For each fraction in ``--kept``, an Engine takes that fraction of ``--messages`` messages of 256 B as a backlog,
then the rest in batches of ten, as the front end sends them, each batch followed by a receive of ten and their
delete (a queue used steadily, its backlog staying as it was); every record it writes goes to a log
(``LogWriter``, ``--segment-mib`` segments) as a worker's does. Then the sealed segments are
compacted into a base as a worker's compaction thread does it (``compact_segments`` with the worker's fold: a
first pass finds what the segments remove, then the fold replays them into a fresh state, leaving out the messages
sent and removed within them, and snapshots it). Every replica compacts its own log, so a message costs this on each.
It prints, per run, the records and bytes folded, the base written, and the CPU the compaction took, per record
and per message sent. It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import Record
from ferrymq.storage.log.compaction import compact_segments
from ferrymq.storage.log.segments import SUFFIX, segment_path
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.server.maintenance import fold

RETENTION = 345600
KEY = bytes(range(32))
BODY = "x" * 256


def _message() -> list[Any]:
    return [str(uuid.uuid4()), BODY, {}, "0" * 32, None, 0, {"SenderId": "AIDABENCH"}]


def traffic(messages: int, kept: float) -> list[Record]:
    """The records of a queue used steadily: a backlog of ``kept`` of ``messages`` sent first, then the rest sent
    ten at a time, each ten followed by a receive of ten and their delete, so the backlog stays as it was."""
    records: list[Record] = []
    engine = Engine(ManualClock(), KEY, on_record=records.append)
    backlog = int(messages * kept) // 10 * 10
    for _ in range(0, backlog, 10):
        engine.send("q", [_message() for _ in range(10)], RETENTION)
    for _ in range(backlog, messages, 10):
        engine.send("q", [_message() for _ in range(10)], RETENTION)
        polled = engine.poll("q", 10, 600, RETENTION)
        engine.delete("q", [row[1] for row in polled.rows])
    return records


def write_log(directory: Path, records: list[Record], segment_bytes: int) -> list[int]:
    """The records in a log, a hundred per group commit; the indexes of its sealed segments."""

    async def run() -> list[int]:
        writer = LogWriter(directory, segment_bytes=segment_bytes)
        for at, record in enumerate(records, start=1):
            writer.append(record, 1)
            if at % 100 == 0:
                await writer.flush()
        await writer.close()
        return [info.index for info in writer.segments[:-1]]

    return asyncio.run(run())


def run(messages: int, kept: float, segment_bytes: int) -> None:
    records = traffic(messages, kept)
    with tempfile.TemporaryDirectory(prefix="ferrymq-compaction-") as tmp:
        directory = Path(tmp)
        sealed = write_log(directory, records, segment_bytes)
        if len(sealed) < 2:
            print(f"  kept {kept:.0%}: too few sealed segments ({len(sealed)}); send more or make them smaller")
            return
        sizes = {path.name: path.stat().st_size for path in directory.glob(f"*{SUFFIX}")}
        folded = sum(sizes[segment_path(directory, index).name] for index in sealed)
        cpu, wall = time.thread_time(), time.perf_counter()
        base = compact_segments(directory, sealed, fold)
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    # The active segment is not folded: the figures per record and per message count the folded share only.
    share = folded / sum(sizes.values())
    print(f"  kept {kept:.0%}: {folded / 2**20:,.0f} MiB of log in {len(sealed)} sealed segments "
          f"({share:.0%} of {len(records):,} records) folded into a base of {base.size / 2**20:,.1f} MiB in "
          f"{wall:.2f} s, {cpu:.2f} s of CPU: {cpu * 1e6 / (len(records) * share):.1f} µs per record, "
          f"{cpu * 1e6 / (messages * share):.1f} µs per message sent, {cpu / (folded / 2**20) * 1e3:.1f} ms per MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--kept", default="0,0.5", help="fractions of the messages left in the queue")
    parser.add_argument("--segment-mib", type=int, default=16)
    args = parser.parse_args()
    print(f"{args.messages:,} messages of {len(BODY)} B, {args.segment_mib} MiB segments")
    for kept in (float(k) for k in args.kept.split(",")):
        run(args.messages, kept, args.segment_mib * 2**20)


if __name__ == "__main__":
    main()
