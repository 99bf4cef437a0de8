"""The gateway's CPU per acknowledged SendMessage, for an A/B check of a change to the front end.

    python benchmarks/gateway_cpu.py --repo base=../ferrymq-base --repo new=. --runs 3

Each ``--repo`` is a checkout with its own ``.venv`` (``make install``). A default stack (``ferrymq up``: three
workers, RF 3, SSE-SQS) is started from each, on its own data directory; then, run after run, the stacks are
loaded in turn with :mod:`sqs_bench`'s SendMessage on ``--connections`` connections (from a process of its own),
and the growth of the gateway's utime + stime (``/proc/<pid>/stat``) is divided by the messages acknowledged.
Alternating the stacks spreads whatever else the machine does over both; the medians are what to compare.
It prints each run and the medians with their spread, and asserts nothing.

    python benchmarks/gateway_cpu.py --repo base=../ferrymq-base --repo new=. --runs 8 --together

loads every stack at the same time instead, round after round (each from a load process of its own), so that
each round's figures are taken under the same load from the rest of the machine; it also prints, per round and
as a median over rounds, each stack's CPU per message against the first one's. On a machine whose load swings
between runs by more than the change being measured, these ratios are what to compare. The stacks load each
other, so the figures are higher than alternated ones.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from soak import own_cpu_seconds, stack_processes, wait_until_quiet
from sqs_bench import Target, _create_queue, _run_process

from ferrymq.infra.local_stack import READY_PREFIX
from ferrymq.infra.up_process import up_environment


class Stack:
    """``ferrymq up`` from one checkout's ``.venv``."""

    def __init__(self, name: str, repo: Path, data_dir: Path) -> None:
        self.name, self.repo, self.data_dir = name, repo, data_dir
        self.process: subprocess.Popen[str] | None = None
        self.endpoint = ""

    def start(self, timeout: float = 120.0) -> None:
        env = up_environment(self.data_dir)
        env["FERRYMQ_HOST"] = "127.0.0.1"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen([str(self.repo / ".venv" / "bin" / "ferrymq"), "up"], env=env,
                                        cwd=self.repo, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        ready = threading.Event()

        def pump() -> None:
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                if line.startswith(READY_PREFIX):
                    self.endpoint = line.split("endpoint=", 1)[1].strip()
                    ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout):
            self.stop()
            raise RuntimeError(f"{self.name}: ferrymq up did not start")
        wait_until_quiet(self.process.pid)

    def gateway_pid(self) -> int:
        assert self.process is not None
        return stack_processes(self.process.pid)["gateway"]

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def one_run(stack: Stack, queue_url: str, seconds: float, connections: int, pool: multiprocessing.pool.Pool,
            ) -> tuple[float, float]:
    """(µs of gateway CPU per message, messages per second)."""
    target = Target(stack.endpoint, "test", "test", "us-east-1")
    pid = stack.gateway_pid()
    before, started = own_cpu_seconds(pid), time.monotonic()
    _, moved = pool.apply(_run_process, ((target, queue_url, "SendMessage", seconds, connections),))
    spent, elapsed = own_cpu_seconds(pid) - before, time.monotonic() - started
    return spent * 1e6 / max(moved, 1), moved / elapsed


def alternated(stacks: list[Stack], queues: dict[str, str], runs: int, seconds: float, connections: int,
               figures: dict[str, list[tuple[float, float]]]) -> None:
    """The stacks loaded in turn, ``runs`` times (after a warm-up of each), the order reversed every other run."""
    with multiprocessing.Pool(1) as pool:
        for stack in stacks:  # warm-up: caches, connections, data keys
            one_run(stack, queues[stack.name], 2.0, connections, pool)
        for run in range(runs):
            order = stacks if run % 2 == 0 else stacks[::-1]
            for stack in order:
                cpu, rate = one_run(stack, queues[stack.name], seconds, connections, pool)
                figures[stack.name].append((cpu, rate))
                print(f"run {run + 1} {stack.name:<10} {cpu:7.1f} µs/msg  {rate:7.0f} msg/s", flush=True)


def together(stacks: list[Stack], queues: dict[str, str], rounds: int, seconds: float, connections: int,
             ) -> dict[str, list[tuple[float, float]]]:
    """Every stack loaded at once, ``rounds`` times (after a warm-up round); per stack, (µs of gateway CPU per
    message, messages per second) of each round, and each round's ratios to the first stack printed."""
    figures: dict[str, list[tuple[float, float]]] = {s.name: [] for s in stacks}
    ratios: dict[str, list[float]] = {s.name: [] for s in stacks[1:]}
    first = stacks[0].name
    with multiprocessing.Pool(len(stacks)) as pool:
        for run in range(rounds + 1):
            span = seconds if run else 2.0
            pids = {s.name: s.gateway_pid() for s in stacks}
            before = {name: own_cpu_seconds(pid) for name, pid in pids.items()}
            started = time.monotonic()
            jobs = {s.name: pool.apply_async(_run_process, ((Target(s.endpoint, "test", "test", "us-east-1"),
                                                             queues[s.name], "SendMessage", span, connections),))
                    for s in stacks}
            moved = {name: job.get()[1] for name, job in jobs.items()}
            elapsed = time.monotonic() - started
            cpu = {name: (own_cpu_seconds(pids[name]) - before[name]) * 1e6 / max(moved[name], 1) for name in pids}
            if not run:
                continue  # warm-up: caches, connections, data keys
            line = [f"round {run}"]
            for name, value in cpu.items():
                figures[name].append((value, moved[name] / elapsed))
                line.append(f"{name} {value:7.1f} µs/msg {moved[name] / elapsed:6.0f} msg/s")
                if name != first:
                    ratios[name].append(value / cpu[first])
                    line.append(f"(x{ratios[name][-1]:.3f})")
            print("  ".join(line), flush=True)
    for name, values in ratios.items():
        print(f"{name:<10} against {first}: median ratio {statistics.median(values):.3f} "
              f"(min {min(values):.3f}, max {max(values):.3f})")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", action="append", required=True, help="NAME=PATH of a checkout with a .venv")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--together", action="store_true", help="load every stack at once, round after round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gateway-cpu-") as tmp:
        stacks = [Stack(name, Path(path).resolve(), Path(tmp) / name)
                  for name, path in (r.split("=", 1) for r in args.repo)]
        figures: dict[str, list[tuple[float, float]]] = {s.name: [] for s in stacks}
        try:
            queues = {}
            for stack in stacks:
                stack.start()
                queues[stack.name] = asyncio.run(_create_queue(Target(stack.endpoint, "test", "test", "us-east-1")))
            if args.together:
                figures = together(stacks, queues, args.runs, args.seconds, args.connections)
            else:
                alternated(stacks, queues, args.runs, args.seconds, args.connections, figures)
        finally:
            for stack in stacks:
                stack.stop()
    for name, runs in figures.items():
        cpus = sorted(c for c, _ in runs)
        if cpus:
            print(f"{name:<10} median {statistics.median(cpus):7.1f} µs/msg  (min {cpus[0]:.1f}, max {cpus[-1]:.1f}; "
                  f"median {statistics.median(r for _, r in runs):.0f} msg/s)")


if __name__ == "__main__":
    main()
