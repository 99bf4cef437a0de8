"""Throughput and latency through the front end with replication factor 3 (majority acks) beside 1.

    python benchmarks/replication_bench.py --seconds 10

Starts ``ferrymq up`` twice on fresh data directories: one worker with replication factor 1, then the
default cluster of three workers with replication factor 3 and majority acks. Against each it runs
``benchmarks/sqs_bench.py`` (SendMessage, SendMessageBatch, ReceiveMessage + DeleteMessageBatch over the JSON
protocol, concurrent keep-alive connections), then prints both sets of figures and the replicated ones as a
share of the unreplicated. It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ferrymq.infra.up_process import UpProcess, up_environment

HERE = Path(__file__).resolve().parent
LINE = re.compile(r"^(\S+)\s+(\d+) req/s\s+(\d+) msg/s\s+p50\s+([\d.]+) ms\s+p99\s+([\d.]+) ms")

SHAPES = {
    "RF 1 (1 worker)": {"FERRYMQ_WORKERS": "1", "FERRYMQ_REPLICATION_FACTOR": "1", "FERRYMQ_ACKS": "leader"},
    "RF 3 majority (3 workers)": {
        "FERRYMQ_WORKERS": "3",
        "FERRYMQ_REPLICATION_FACTOR": "3",
        "FERRYMQ_ACKS": "majority",
    },
}


def run_shape(name: str, env: dict[str, str], seconds: float, concurrency: int, processes: int) -> dict[str, tuple]:
    with tempfile.TemporaryDirectory(prefix="ferrymq-repl-bench-") as tmp:
        data = Path(tmp)
        stack = UpProcess(data, {**up_environment(data), **env, "FERRYMQ_LOG_LEVEL": "WARNING"})
        stack.start()
        try:
            out = subprocess.run(
                [sys.executable, str(HERE / "sqs_bench.py"), "--endpoint", stack.endpoint, "--seconds", str(seconds),
                 "--concurrency", str(concurrency), "--processes", str(processes)],
                capture_output=True, text=True, check=True,
            ).stdout
        finally:
            stack.stop()
    print(f"\n{name}\n{out}", flush=True)
    figures = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            figures[m.group(1)] = tuple(float(x) for x in m.groups()[1:])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    results = {
        name: run_shape(name, env, args.seconds, args.concurrency, args.processes) for name, env in SHAPES.items()
    }
    single, replicated = results.values()
    print("\nreplicated as a share of unreplicated (msg/s), and p50 / p99 latency in ms")
    for scenario, base in single.items():
        other = replicated.get(scenario)
        if other is None or not base[1]:
            continue
        print(f"  {scenario:<34} {100 * other[1] / base[1]:5.0f} %   p50 {base[2]:.2f} -> {other[2]:.2f}   "
              f"p99 {base[3]:.2f} -> {other[3]:.2f}")


if __name__ == "__main__":
    main()
