"""The longest a single call on one queue of many messages holds a worker's loop, in process.

    python benchmarks/queue_steps_bench.py [--messages 1000000]

An Engine (as a serving worker runs it: the rows of purged and dropped queues freed in steps) takes ``--messages``
messages of 256 B in one queue, then each scenario below drives it as requests and the worker's periodic work
would, timing every call; it prints, per scenario, the calls made and the longest and total time of one. What a
call holds is what the worker's loop is held for (the engine runs on it). It prints figures and asserts nothing.

The engine's clock moves on by a message's share of a second at ``--rate`` messages a second (16,000: about what a
whole default stack takes in batches on this machine, all of it to one partition) for each message sent or removed,
as a worker's requests would move it: how many removed ids a queue keeps for resends is what arrives within
``RESEND_HORIZON_MS`` (30 s) of its record timeline, and their dictionary's growth is part of what a call costs.

- ``drain``: every message received and deleted, ten at a time;
- ``delete after the horizon``: the first removal after the resend horizon passed, which forgets the ids removed;
- ``release``: the first receive once the visibility timeouts of every message ran out together;
- ``expire``: the sweeps that expire every message once their retention ended (a queue nobody asks for);
- ``purge``: PurgeQueue, then the steps that free the rows;
- ``drop``: DeleteQueue's drop, then the steps that free the rows;
- ``FIFO, a group a message``: a FIFO queue of ``--messages`` messages, each of a group of its own, all sent
  before anyone receives; then a thousand receives of ten, each followed by the delete of what it got; after it,
  the objects the garbage collector tracks and how long a full collection takes are printed;
- ``behind a held message``: one message received with a 12-hour visibility timeout and never deleted, then the
  queue filled, then as many messages again sent, received and deleted ten at a time: the send order behind the
  held one fills with dead entries until it is cleaned (rebuilt whole, before it was cleaned in steps).
"""

from __future__ import annotations

import argparse
import gc
import time
import uuid
from collections.abc import Callable
from typing import Any

from ferrymq.clock import ManualClock
from ferrymq.limits import RESEND_HORIZON_MS
from ferrymq.storage.engine import Engine

KEY = bytes(range(32))
BODY = "x" * 256
RETENTION = 345600
Q = "000000000000/big/1"
HELD = "000000000000/held/1"
FIFO = "000000000000/groups.fifo/1"


class Timings:
    def __init__(self) -> None:
        self.rows: list[tuple[str, int, float, float]] = []

    def scenario(self, name: str, calls: list[Callable[[], Any]] | Callable[[], bool]) -> None:
        """Time each call of ``calls``; or, given one callable, call it until it answers false."""
        worst = total = 0.0
        n = 0
        while True:
            if isinstance(calls, list):
                if n == len(calls):
                    break
                call = calls[n]
            else:
                call = calls
            start = time.perf_counter()
            more = call()
            took = time.perf_counter() - start
            worst, total, n = max(worst, took), total + took, n + 1
            if not isinstance(calls, list) and not more:
                break
        self.rows.append((name, n, worst, total))

    def print(self) -> None:
        print(f"{'scenario':<28} {'calls':>8} {'longest ms':>11} {'total ms':>10}")
        for name, n, worst, total in self.rows:
            print(f"{name:<28} {n:>8} {worst * 1000:>11.1f} {total * 1000:>10.0f}")


def fill(engine: Engine, clock: ManualClock, n: int, rate: float, queue: str = Q) -> None:
    for start in range(0, n, 10):
        batch = [[str(uuid.uuid4()), BODY, {}, "0" * 32, None, 0, {}] for _ in range(min(10, n - start))]
        engine.send(queue, batch, RETENTION)
        clock.advance(len(batch) / rate)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=16_000.0, help="messages a second the clock moves on by")
    args = parser.parse_args()
    n, rate = args.messages, args.rate
    gc.set_threshold(20_000)  # the workers' young-generation threshold (ferrymq.collector)
    clock = ManualClock()
    engine = Engine(clock, KEY)
    engine.partition.free_in_steps = True
    timings = Timings()

    fill(engine, clock, n, rate)

    def receive_and_delete() -> bool:
        rows = engine.poll(Q, 10, 600, RETENTION).rows
        engine.delete(Q, [row[1] for row in rows])
        clock.advance(len(rows) / rate)
        return bool(rows)

    timings.scenario("drain (receive + delete)", receive_and_delete)
    clock.advance(RESEND_HORIZON_MS / 1000 + 1)
    fill(engine, clock, 1, rate)
    received = [row[1] for row in engine.poll(Q, 1, 600, RETENTION).rows]
    timings.scenario("delete after the horizon", [lambda: engine.delete(Q, received)])

    fill(engine, clock, n, rate)
    while engine.poll(Q, 10, 30, RETENTION).rows:
        pass
    clock.advance(31)
    timings.scenario("release (first receive)", [lambda: engine.poll(Q, 10, 30, RETENTION)])
    clock.advance(RETENTION)
    timings.scenario("expire (sweeps)", lambda: engine.sweep().more)

    fill(engine, clock, n, rate)
    timings.scenario("purge", [lambda: engine.purge(Q)])
    timings.scenario("purge: rows freed", engine.partition.free_unowned)
    fill(engine, clock, n, rate)
    timings.scenario("drop", [lambda: engine.drop_queue(Q)])
    timings.scenario("drop: rows freed", engine.partition.free_unowned)
    for start in range(0, n, 10):
        batch = [(uuid.uuid4().hex, BODY, {}, "0" * 32, None, 0, {}, uuid.uuid4().hex, uuid.uuid4().hex, None)
                 for _ in range(min(10, n - start))]
        engine.store(FIFO, batch, RETENTION, fifo=True)
        clock.advance(len(batch) / rate)

    def fifo_receive_and_delete() -> None:
        rows = engine.poll(FIFO, 10, 600, RETENTION).rows
        engine.delete(FIFO, [row[1] for row in rows])

    timings.scenario("FIFO, a group a message", [fifo_receive_and_delete] * 1000)
    # What a full collection walks with the FIFO queue's groups held (the scenarios' collections are in the times).
    gc.collect()
    started = time.perf_counter()
    gc.collect()
    collection, tracked = time.perf_counter() - started, len(gc.get_objects())

    fill(engine, clock, 1, rate, HELD)
    engine.poll(HELD, 1, 43200, RETENTION)
    fill(engine, clock, n, rate, HELD)

    def send_receive_delete() -> None:
        fill(engine, clock, 10, rate, HELD)
        rows = engine.poll(HELD, 10, 600, RETENTION).rows
        engine.delete(HELD, [row[1] for row in rows])
        clock.advance(len(rows) / rate)

    timings.scenario("behind a held message", [send_receive_delete] * (n // 8))
    print(f"{n:,} messages of {len(BODY)} B in one queue, the clock moving at {rate:,.0f} messages a second")
    timings.print()
    print(f"with the FIFO queue's groups held: {tracked:,} objects tracked by the garbage collector, "
          f"a full collection {collection * 1000:.0f} ms")


if __name__ == "__main__":
    main()
