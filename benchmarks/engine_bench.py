"""CPU the queue engine spends per message, in process: no worker, no log, no RPC.

    python benchmarks/engine_bench.py [--messages 200000] [--repeat 5]

Phases on a standard queue without priorities (send in batches of ten, receive ten + delete, receives whose
visibility ran out so messages come back, replay of the records as a follower or recovery applies them), then
the same on a queue with four priority levels (``docs/design/priorities.md``), messages spread evenly over the
levels. Each figure is the best of ``--repeat`` runs, in microseconds per message. It prints figures and
asserts nothing.
"""

from __future__ import annotations

import argparse
import inspect
import time
import uuid
from collections.abc import Callable
from typing import Any

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine, PartitionState

RETENTION = 345600
KEY = bytes(range(32))


def _message(body: str, level: int) -> list[Any]:
    system: dict[str, Any] = {"SenderId": "AIDABENCH"}
    if level:
        system["FerryMQPriority"] = level
    return [str(uuid.uuid4()), body, {}, "0" * 32, None, 0, system]


def _batches(n: int, levels: int) -> list[list[list[Any]]]:
    return [[_message("x" * 64, (i + k) % levels) for k in range(10)] for i in range(0, n, 10)]


def _poll_options(levels: int) -> dict[str, Any]:
    return {"priority_levels": levels} if levels > 1 else {}


def run(n: int, levels: int) -> dict[str, float]:
    """Seconds per message of each phase, for one run over a fresh engine."""
    clock, records = ManualClock(), []
    engine = Engine(clock, KEY, on_record=records.append)
    batches = _batches(n, levels)
    options = _poll_options(levels)
    out: dict[str, float] = {}

    t0 = time.perf_counter()
    for batch in batches:
        engine.send("q", batch, RETENTION)
    out["send 10"] = (time.perf_counter() - t0) / n

    # Visibility 0: each receive puts its messages straight back, so the next one finds them returned.
    t0 = time.perf_counter()
    got = 0
    while got < n:
        polled = engine.poll("q", 10, 0, RETENTION, **options)
        got += len(polled.rows)
        clock.advance(0.001)
    out["receive 10 (returned)"] = (time.perf_counter() - t0) / n

    t0 = time.perf_counter()
    got = 0
    while True:
        polled = engine.poll("q", 10, 600, RETENTION, **options)
        if not polled.rows:
            break
        engine.delete("q", [row[1] for row in polled.rows])
        got += len(polled.rows)
    out["receive 10 + delete"] = (time.perf_counter() - t0) / max(got, 1)

    t0 = time.perf_counter()
    PartitionState.replay(records)
    out["replay (apply)"] = (time.perf_counter() - t0) / n
    return out


def best(n: int, levels: int, repeat: int) -> dict[str, float]:
    runs = [run(n, levels) for _ in range(repeat)]
    return {phase: min(r[phase] for r in runs) for phase in runs[0]}


def report(title: str, figures: dict[str, float]) -> None:
    print(title)
    for phase, seconds in figures.items():
        print(f"  {phase:<26} {seconds * 1e6:8.3f} µs/msg")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    report("standard queue, no priorities", best(args.messages, 1, args.repeat))
    poll: Callable[..., Any] = Engine.poll
    if "priority_levels" in inspect.signature(poll).parameters:
        report("standard queue, 4 priority levels", best(args.messages, 4, args.repeat))
    else:
        print("(this engine has no priority levels)")


if __name__ == "__main__":
    main()
