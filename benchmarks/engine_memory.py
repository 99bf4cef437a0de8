"""Memory the queue engine holds per stored message, besides the body, and its rates, in process.

    python benchmarks/engine_memory.py [--messages 200000] [--body-bytes 256] [--fifo] [--sse]

Fills one Engine with ``--messages`` sends of ``--body-bytes`` bodies (batches of ten, each message shaped as the
front end sends it: a UUID message id, the MD5 of the body, a ``SenderId`` system attribute; ``--fifo``: a FIFO
queue through ``store``, 100 message groups, a content-based deduplication id each; ``--sse``: as an encrypting
front end stores them, the body an opaque envelope of bytes and the MD5s empty, as the default stack does).
It prints:

- the bytes tracemalloc sees allocated per message, and the process's RSS growth per message, both less the
  body's own bytes (what step 4 of docs/design/storage-at-scale.md moves to disk);
- send, and receive ten + delete, rates in messages per second (in process: no RPC, no log).

The bodies are made before measuring starts and kept alive after, so what is counted is what the engine adds.
It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import time
import tracemalloc
import uuid
from typing import Any

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine

RETENTION = 345600
KEY = bytes(range(32))
QUEUE = "000000000000/bench/1"
FIFO_QUEUE = "000000000000/bench.fifo/1"
SENDER = {"SenderId": "AIDABENCHMARK0000000"}


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def bodies(n: int, body_bytes: int, sse: bool = False) -> list[Any]:
    if sse:
        return [os.urandom(body_bytes) for _ in range(n)]
    return [f"{i:012d}".ljust(body_bytes, "x") for i in range(n)]


def message(i: int, body: Any, fifo: bool) -> list[Any]:
    """A message as the worker decodes it from a request: every string and dict its own object."""
    raw = body if isinstance(body, bytes) else body.encode()
    md5 = "" if isinstance(body, bytes) else hashlib.md5(raw).hexdigest()
    if fifo:
        return [str(uuid.uuid4()), body, {}, md5, None, 0, dict(SENDER), f"group-{i % 100}",
                hashlib.sha256(raw).hexdigest(), None]
    return [str(uuid.uuid4()), body, {}, md5, None, 0, dict(SENDER)]


def fill(engine: Engine, texts: list[Any], fifo: bool) -> float:
    """Sends every body in batches of ten; the seconds spent in the engine."""
    spent = 0.0
    for i in range(0, len(texts), 10):
        chunk = [message(i + k, body, fifo) for k, body in enumerate(texts[i:i + 10])]
        started = time.perf_counter()
        if fifo:
            engine.store(FIFO_QUEUE, chunk, RETENTION, fifo=True)
        else:
            engine.send(QUEUE, chunk, RETENTION)
        spent += time.perf_counter() - started
    return spent


def drain(engine: Engine, n: int, fifo: bool) -> tuple[int, float]:
    queue = FIFO_QUEUE if fifo else QUEUE
    started = time.perf_counter()
    got = 0
    while got < n:
        rows = engine.poll(queue, 10, 30, RETENTION).rows
        if not rows:
            break
        engine.delete(queue, [row[1] for row in rows])
        got += len(rows)
    return got, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--body-bytes", type=int, default=256)
    parser.add_argument("--fifo", action="store_true")
    parser.add_argument("--sse", action="store_true")
    args = parser.parse_args()
    n = args.messages

    texts = bodies(n, args.body_bytes, args.sse)
    # RSS first, in a process that has done nothing else yet; tracemalloc then, over a second engine.
    engine = Engine(ManualClock(), KEY)
    gc.collect()
    rss_before = rss_bytes()
    send_seconds = fill(engine, texts, args.fifo)
    gc.collect()
    rss = rss_bytes() - rss_before
    got, seconds = drain(engine, n, args.fifo)
    del engine
    gc.collect()
    engine = Engine(ManualClock(), KEY)
    tracemalloc.start()
    traced_before = tracemalloc.get_traced_memory()[0]
    fill(engine, texts, args.fifo)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - traced_before
    tracemalloc.stop()
    # The bodies were made before either fill and are shared with the engine: neither figure counts them.
    kind = ("FIFO" if args.fifo else "standard") + (", encrypted" if args.sse else "")
    print(f"{n} messages of {args.body_bytes} B ({kind} queue), bodies not counted")
    print(f"  tracemalloc:     {traced / n:10.1f} B per message")
    print(f"  RSS growth:      {rss / n:10.1f} B per message")
    print(f"  send:            {n / send_seconds:10.0f} msg/s")
    print(f"  receive+delete:  {got / seconds:10.0f} msg/s ({got} messages)")


if __name__ == "__main__":
    main()
