"""The storage workers' CPU per acknowledged SendMessage, leader and followers apart, for an A/B check of a change
to the worker, the log or replication.

    python benchmarks/workers_cpu.py --repo base=../ferrymq-base --repo new=. --runs 5
    python benchmarks/workers_cpu.py --repo base=../ferrymq-base --repo new=. --scenario SendMessageBatch

Each ``--repo`` is a checkout with its own ``.venv`` (``make install``); stacks are started as
:mod:`gateway_cpu` starts them (``ferrymq up``: three workers, RF 3 with majority acks, fsync before
acknowledging, SSE-SQS). ``ferrymq cluster status --json`` names the partition's leader. Then, run after run, the
stacks are loaded in turn with :mod:`sqs_bench`'s SendMessage on each of ``--connections`` (16 and 1 by default),
and the growth of each worker's utime + stime (``/proc/<pid>/stat``) is divided by the messages acknowledged.
Alternating the stacks spreads whatever else the machine does over both; the medians are what to compare. It
prints each run, then per stack and connection count the medians with their spreads, then (with two stacks) the
median over runs of the second's figure against the first's in the same run: on a machine whose load swings
between runs, neighbours in time compare better than medians do. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from gateway_cpu import Stack
from soak import own_cpu_seconds, stack_processes
from sqs_bench import Target, _create_queue, _run_process

from ferrymq.infra.up_process import up_environment

Figures = dict[str, float]
"""µs of CPU per message: ``leader``, ``follower`` (the followers' mean), ``gateway``; and ``rate`` (msg/s)."""


def leader_of(stack: Stack) -> str:
    """The worker id leading the stack's partition 0 (``ferrymq cluster status --json``)."""
    out = subprocess.run([str(stack.repo / ".venv" / "bin" / "ferrymq"), "cluster", "status", "--json"],
                         env=up_environment(stack.data_dir), cwd=stack.repo, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    report = json.loads(out)
    return next(p["leader"] for p in report["partitions"] if p["partition"] == 0)


def one_run(stack: Stack, leader: str, queue_url: str, seconds: float, connections: int,
            pool: multiprocessing.pool.Pool, scenario: str = "SendMessage") -> Figures:
    assert stack.process is not None
    target = Target(stack.endpoint, "test", "test", "us-east-1")
    pids = stack_processes(stack.process.pid)
    workers = {name: pid for name, pid in pids.items() if name.startswith("worker-")}
    if leader not in workers:
        raise RuntimeError(f"{stack.name}: leader {leader} is not among the workers {sorted(workers)}")
    watched = {**workers, "gateway": pids["gateway"]}
    before, started = {n: own_cpu_seconds(p) for n, p in watched.items()}, time.monotonic()
    _, moved = pool.apply(_run_process, ((target, queue_url, scenario, seconds, connections),))
    elapsed = time.monotonic() - started
    per = {n: (own_cpu_seconds(p) - before[n]) * 1e6 / max(moved, 1) for n, p in watched.items()}
    followers = [per[n] for n in workers if n != leader]
    return {"leader": per[leader], "follower": statistics.fmean(followers) if followers else 0.0,
            "gateway": per["gateway"], "rate": moved / elapsed}


def spread(values: list[float]) -> str:
    values = sorted(values)
    return f"{statistics.median(values):6.1f} ({values[0]:.0f}-{values[-1]:.0f})"


def ratios(values: list[float]) -> str:
    values = sorted(values)
    return f"{statistics.median(values):.2f} ({values[0]:.2f}-{values[-1]:.2f})" if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", required=True, help="NAME=PATH of a checkout with a .venv")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--connections", type=int, action="append", help="connection counts (default 16 and 1)")
    parser.add_argument("--scenario", choices=("SendMessage", "SendMessageBatch"), default="SendMessage",
                        help="what the load sends: one message a request, or batches of ten (figures per message)")
    args = parser.parse_args()
    counts = args.connections or [16, 1]
    with tempfile.TemporaryDirectory(prefix="workers-cpu-") as tmp:
        stacks = [Stack(name, Path(path).resolve(), Path(tmp) / name)
                  for name, path in (r.split("=", 1) for r in args.repo)]
        figures: dict[tuple[str, int], list[Figures]] = {(s.name, c): [] for s in stacks for c in counts}
        try:
            queues, leaders = {}, {}
            for stack in stacks:
                stack.start()
                queues[stack.name] = asyncio.run(_create_queue(Target(stack.endpoint, "test", "test", "us-east-1")))
                leaders[stack.name] = leader_of(stack)
                print(f"{stack.name}: leader {leaders[stack.name]}", flush=True)
            with multiprocessing.Pool(1) as pool:
                for stack in stacks:  # warm-up: caches, connections, data keys
                    one_run(stack, leaders[stack.name], queues[stack.name], 2.0, counts[0], pool, args.scenario)
                for run in range(args.runs):
                    order = stacks if run % 2 == 0 else stacks[::-1]
                    for connections in counts:
                        for stack in order:
                            f = one_run(stack, leaders[stack.name], queues[stack.name], args.seconds, connections,
                                        pool, args.scenario)
                            figures[(stack.name, connections)].append(f)
                            print(f"run {run + 1} x{connections:<3} {stack.name:<8} leader {f['leader']:6.1f}  "
                                  f"follower {f['follower']:6.1f}  gateway {f['gateway']:6.1f} µs/msg  "
                                  f"{f['rate']:6.0f} msg/s", flush=True)
            for stack in stacks:
                now = leader_of(stack)
                if now != leaders[stack.name]:
                    print(f"warning: {stack.name}'s leader moved from {leaders[stack.name]} to {now}")
        finally:
            for stack in stacks:
                stack.stop()
    print("medians (min-max), µs of CPU per acknowledged message")
    for (name, connections), runs in figures.items():
        if runs:
            print(f"x{connections:<3} {name:<8} leader {spread([r['leader'] for r in runs])}  "
                  f"follower {spread([r['follower'] for r in runs])}  gateway {spread([r['gateway'] for r in runs])}"
                  f"  {statistics.median(r['rate'] for r in runs):.0f} msg/s")
    if len(stacks) == 2:
        first, second = (s.name for s in stacks)
        print(f"{second} against {first} in the same run: median ratio (min-max)")
        for connections in counts:
            pairs = list(zip(figures[(first, connections)], figures[(second, connections)], strict=False))
            if pairs:
                print(f"x{connections:<3} " + "  ".join(
                    f"{key} {ratios([b[key] / a[key] for a, b in pairs if a[key]])}"
                    for key in ("leader", "follower", "gateway")))


if __name__ == "__main__":
    main()
