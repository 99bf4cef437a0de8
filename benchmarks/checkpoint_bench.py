"""What a partition's checkpoint costs at a backlog: a base, then deltas as the queue is used, and a load.

    python benchmarks/checkpoint_bench.py [--messages 3000000] [--rounds 4] [--round-messages 200000]

Fills one Engine in process with ``--messages`` messages as the front end sends them (a UUID id, a hex MD5, a
``SenderId``; bodies dropped from memory, as a worker keeps them in its log), writes a checkpoint (a base), then
``--rounds`` times sends ``--round-messages`` more and receives and deletes as many from the front, and writes a
checkpoint again (a delta: ``ferrymq.storage.log.checkpoint_chain``). 200,000 messages of 256 B are about
128 MiB of log, the interval a worker takes checkpoints at while serving. It prints, for each file, its size and
the CPU its writing took (in a worker, a forked child's, off the event loop), and then the CPU a load of the whole
chain takes, as a start does, with what it added to the resident memory (anonymous and of files: a load maps the
chunks of the files, ``ferrymq.storage.log.mapped_chunks``), and then the CPU of copying what it mapped into memory
of the process's own, as a worker does after a start. It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.log import mapped_chunks
from ferrymq.storage.log.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from ferrymq.storage.log.checkpoint_chain import read_chain

RETENTION = 345600
KEY = bytes(range(32))
QUEUE = "000000000000/bench/1"
SENDER = {"SenderId": "AIDABENCHMARK0000000"}


def send(engine: Engine, count: int, tag: str) -> None:
    for start in range(0, count, 10):
        batch = []
        for i in range(min(10, count - start)):
            body = f"{tag}{start + i:012d}"
            batch.append([str(uuid.uuid4()), body, {}, hashlib.md5(body.encode()).hexdigest(), None, 0, SENDER])
        engine.send(QUEUE, batch, RETENTION)
    engine.partition.table.drop_bodies()


def consume(engine: Engine, count: int) -> None:
    left = count
    while left > 0:
        polled = engine.poll(QUEUE, min(10, left), 30, RETENTION, short_poll=True)
        handles = [row[1] for row in polled.rows]
        if not handles:
            return
        engine.delete(QUEUE, handles)
        left -= len(handles)


def write(directory: Path, engine: Engine, offset: int) -> None:
    started = time.process_time()
    size = write_checkpoint(directory, Checkpoint(offset, [], {}, engine.partition))
    spent = time.process_time() - started
    chain = read_chain(directory)
    assert chain is not None
    kind = f"delta {chain.last.position}" if chain.last.position else "base"
    print(f"  {kind:<9} {size / 1e6:9.1f} MB  {spent:6.2f} s CPU  ({engine.partition.table.live:,} messages)")


def _rss() -> dict[str, int]:
    """Resident bytes of this process, anonymous and of files (``/proc/self/status``)."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("RssAnon:", "RssFile:")):
            name, value, _ = line.split()
            found[name[:-1]] = int(value) * 1024
    return found


def _growth(before: dict[str, int], after: dict[str, int]) -> str:
    return ", ".join(f"{name} {(after[name] - before[name]) / 2**20:+.0f} MiB" for name in sorted(after))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--round-messages", type=int, default=200_000)
    args = parser.parse_args()
    clock = ManualClock()
    engine = Engine(clock, KEY)
    started = time.monotonic()
    send(engine, args.messages, "m")
    print(f"filled {args.messages:,} messages in {time.monotonic() - started:.1f} s")
    directory = Path(tempfile.mkdtemp(prefix="checkpoint-bench-"))
    try:
        write(directory, engine, 1)
        for round_ in range(args.rounds):
            send(engine, args.round_messages, f"r{round_}-")
            # Time passes between rounds (at a few thousand messages a second, a round takes a minute or more):
            # the ids of deleted messages are kept for 30 s (``ferrymq.limits.RESEND_HORIZON_MS``), not forever.
            clock.advance(60)
            consume(engine, args.round_messages)
            write(directory, engine, round_ + 2)
        del engine
        gc.collect()
        before = _rss()
        started = time.process_time()
        found = read_checkpoint(directory)
        assert found is not None
        print(f"  load of the base and {found.deltas} deltas: {time.process_time() - started:.2f} s CPU "
              f"({found.state.table.live:,} messages); RSS grew {_growth(before, _rss())}")
        # What a worker then does on its loop, paced: the mapped pages copied into memory of its own.
        mapped_chunks.settle(found.state.table.column_views())
        mapped = mapped_chunks.mapped_bytes()
        started = time.process_time()
        while mapped_chunks.copy_mapped(1 << 20):
            pass
        print(f"  copy of the {mapped / 2**20:.0f} MiB it mapped into memory of its own: "
              f"{time.process_time() - started:.2f} s CPU; RSS grew {_growth(before, _rss())} since before the load")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
