"""FerryMQ against a null server and LocalStack, in one run: throughput, latency, and CPU per message per process.

    python benchmarks/compare.py                         # null server, FerryMQ RF 1, FerryMQ default
    python benchmarks/compare.py --localstack-python .cache/localstack/bin/python   # and LocalStack's SQS
    python benchmarks/compare.py --chart docs/bench/compare.png

Targets, each started here on loopback and stopped after its scenarios:

- ``null``: :mod:`null_sqs_server` (canned answers; the cost of the client and HTTP alone);
- ``localstack``: LocalStack's SQS on the host (``--localstack-python``: an interpreter with ``localstack-core``
  installed; ``make localstack-bench`` makes one), in memory, without signature checks;
- ``ferrymq-rf1``: ``ferrymq up`` with one worker and RF 1;
- ``ferrymq``: ``ferrymq up`` as shipped: three workers, RF 3 (majority), SSE-SQS, SigV4, fsync before acknowledging;
- ``ferrymq-gwN``: the same with N gateway processes on its port (``--targets ferrymq-gw1,ferrymq-gw2`` shows 1
  against 2).

Scenarios (AWS JSON protocol, SigV4-signed, 256-byte bodies, keep-alive connections; the load runs in a process of
its own): SendMessage on 1 and on 16 connections, SendMessageBatch of 10 on 16, ReceiveMessage of 10 +
DeleteMessageBatch on 16, boto3's ``send_message`` on one thread (its p50 includes the SDK's own time), and an
idle period. Around each scenario the utime + stime of every process of the target (``/proc/<pid>/stat``) is read,
and its growth divided by the messages acknowledged: CPU per message, which stays put where requests per second
move with the machine's mood.

It prints the table, the ratios the performance targets name, and the CPU per message of each process; with
``--chart`` it also draws the throughput figures as a PNG (matplotlib: ``pip install 'ferrymq[bench]'``). It
asserts nothing. Every loop is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from soak import own_cpu_seconds, stack_processes, wait_until_quiet
from sqs_bench import Target, _create_queue, _run_process

from ferrymq.infra.up_process import UpProcess, up_environment

HERE = Path(__file__).resolve().parent
BODY = "x" * 256
SCENARIOS = ("send x1", "send x16", "batch x16", "receive+delete x16", "boto3 send x1", "idle")
GATEWAYS_TARGET = "ferrymq-gw"
"""``ferrymq-gwN``: the default stack with N gateway processes (``FERRYMQ_GATEWAY_PROCESSES``)."""
THROUGHPUT = ("send x16", "batch x16", "receive+delete x16")
"""The scenarios measured in messages a second: the chart's, and the ratios against LocalStack's."""
_LOAD = {
    "send x1": ("SendMessage", 1),
    "send x16": ("SendMessage", 16),
    "batch x16": ("SendMessageBatch", 16),
    "receive+delete x16": ("ReceiveMessage+DeleteMessageBatch", 16),
}


@dataclass
class Result:
    requests: int = 0
    messages: int = 0
    seconds: float = 0.0
    p50_ms: float | None = None
    cpu_us_per_message: dict[str, float] = field(default_factory=dict)
    """Per process; for ``idle``, percent of one core instead."""
    client_us_per_message: float | None = None
    """The load client's own CPU per message: what the target's processes share the machine's cores with."""

    @property
    def msg_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0


# --- processes and their CPU ---------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` and of every descendant it has now."""
    return sum(own_cpu_seconds(p) for p in [pid, *_descendants(pid)])


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{p}/task").iterdir():
                with contextlib.suppress(OSError):
                    kids = [int(x) for x in (task / "children").read_text().split()]
                    found.extend(kids)
                    todo.extend(kids)
    return found


class Server:
    """A target's processes: ``start`` returns its endpoint; ``processes`` names the pids to measure."""

    name = ""

    def start(self) -> str:
        raise NotImplementedError

    def processes(self) -> dict[str, int]:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class ChildServer(Server):
    """One process that prints ``<ready> <url>`` when it serves."""

    def __init__(self, name: str, argv: list[str], ready: str, env: dict[str, str] | None = None,
                 timeout: float = 120.0) -> None:
        self.name, self.argv, self.ready, self.env, self.timeout = name, argv, ready, env, timeout
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> str:
        self.process = subprocess.Popen(self.argv, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, start_new_session=True)
        lines: queue.Queue[str] = queue.Queue()

        def pump() -> None:
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                lines.put(line)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                line = lines.get(timeout=0.5)
                if self.ready in line:
                    return line.split()[-1].strip()
            if self.process.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"{self.name} did not start")

    def processes(self) -> dict[str, int]:
        assert self.process is not None
        return {self.name: self.process.pid}

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


class LocalStack(ChildServer):
    def __init__(self, python: str, port: int) -> None:
        env = {**os.environ, "OVERRIDE_IN_DOCKER": "0", "GATEWAY_LISTEN": f"127.0.0.1:{port}", "SERVICES": "sqs",
               "SQS_ENDPOINT_STRATEGY": "path", "EAGER_SERVICE_LOADING": "1"}
        super().__init__("localstack", [python, "-m", "localstack.runtime.main"], "Ready.", env)
        self.url = f"http://127.0.0.1:{port}"

    def start(self) -> str:
        super().start()
        return self.url


class FerryMQ(Server):
    def __init__(self, name: str, data_dir: Path, **overrides: str) -> None:
        self.name = name
        env = up_environment(data_dir)
        env.update({"FERRYMQ_HOST": "127.0.0.1", **overrides})
        self.stack = UpProcess(data_dir, env)

    def start(self) -> str:
        self.stack.start()
        assert self.stack.process is not None
        wait_until_quiet(self.stack.process.pid)
        return self.stack.endpoint

    def processes(self) -> dict[str, int]:
        assert self.stack.process is not None
        return stack_processes(self.stack.process.pid)

    def stop(self) -> None:
        self.stack.stop()


# --- scenarios -----------------------------------------------------------------------------------------------


def _boto3_sends(endpoint: str, queue_url: str, seconds: float) -> list[float]:
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                       aws_secret_access_key="test", config=Config(retries={"total_max_attempts": 1}))
    latencies = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        sqs.send_message(QueueUrl=queue_url, MessageBody=BODY)
        latencies.append(time.perf_counter() - started)
    return latencies


def run_scenario(server: Server, target: Target, queue_url: str, scenario: str, seconds: float,
                 pool: Any) -> Result:
    pids = server.processes()
    client = pool.apply(os.getpid)
    client_before = own_cpu_seconds(client)
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    started = time.monotonic()
    if scenario == "idle":
        time.sleep(seconds)
        latencies: list[float] = []
        moved = 0
    elif scenario == "boto3 send x1":
        latencies = pool.apply(_boto3_sends, (target.endpoint, queue_url, seconds))
        moved = len(latencies)
    else:
        name, connections = _LOAD[scenario]
        latencies, moved = pool.apply(_run_process, ((target, queue_url, name, seconds, connections),))
    elapsed = time.monotonic() - started
    spent = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    result = Result(len(latencies), moved, elapsed, statistics.median(latencies) * 1000 if latencies else None)
    if scenario == "idle":
        result.cpu_us_per_message = {name: 100 * s / elapsed for name, s in spent.items()}
    elif moved:
        result.cpu_us_per_message = {name: s * 1e6 / moved for name, s in spent.items()}
        result.client_us_per_message = (own_cpu_seconds(client) - client_before) * 1e6 / moved
    return result


def measure(server: Server, seconds: float, pool: Any, scenarios: tuple[str, ...] = SCENARIOS) -> dict[str, Result]:
    endpoint = server.start()
    try:
        target = Target(endpoint, "test", "test", "us-east-1")
        queue_url = asyncio.run(_create_queue(target))
        # A short warm-up: caches, connections and data keys, as a running service has them (idle alone: none).
        if set(scenarios) != {"idle"}:
            run_scenario(server, target, queue_url, "send x16", min(seconds, 2.0), pool)
        return {s: run_scenario(server, target, queue_url, s, seconds, pool) for s in scenarios}
    finally:
        server.stop()


# --- the report ------------------------------------------------------------------------------------------------


def _cell(result: Result, scenario: str) -> str:
    if scenario in ("send x1", "boto3 send x1"):
        return f"{result.p50_ms:.2f} ms p50" if result.p50_ms is not None else "-"
    if scenario == "idle":
        return f"{sum(result.cpu_us_per_message.values()):.1f}% core"
    return f"{result.msg_per_s:,.0f} msg/s"


def report(results: dict[str, dict[str, Result]]) -> list[str]:
    names = list(results)
    lines = ["| scenario | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    measured = [s for s in SCENARIOS if all(s in results[n] for n in names)]
    every = len(measured) == len(SCENARIOS)
    for scenario in measured:
        lines.append(f"| {scenario} | " + " | ".join(_cell(results[n][scenario], scenario) for n in names) + " |")
    lines += ["", "ratios (FerryMQ as shipped):"]
    ours, null, ls = results.get("ferrymq"), results.get("null"), results.get("localstack")
    if ours and null and every:
        for s in ("send x16", "batch x16"):
            lines.append(f"  {s}: {ours[s].msg_per_s / max(null[s].msg_per_s, 1):.0%} of the null server's "
                         "(target >= 60%)")
        if ours["send x1"].p50_ms and null["send x1"].p50_ms:
            lines.append(f"  send x1 p50: {ours['send x1'].p50_ms / null['send x1'].p50_ms:.1f}x the null server's "
                         "(target <= 3x)")
    if ours and ls and every:
        for s in THROUGHPUT:
            lines.append(f"  {s}: {ours[s].msg_per_s / max(ls[s].msg_per_s, 1):.1f}x LocalStack's (target >= 10x)")
        if ours["boto3 send x1"].p50_ms and ls["boto3 send x1"].p50_ms:
            lines.append(f"  boto3 send x1 p50: {ours['boto3 send x1'].p50_ms / ls['boto3 send x1'].p50_ms:.0%} of "
                         "LocalStack's (target <= 50%)")
    if ours and null and ls and every:
        # A rate needs at most (cores / rate) of CPU per message for the client and the target together: the most
        # the stack may spend for each ratio, whatever else it does.
        lines += ["", "the most CPU per message the stack may spend for those ratios, beside this client on "
                  f"{os.cpu_count()} cores:"]
        for s in ("send x16", "batch x16"):
            client = ours[s].client_us_per_message or 0.0
            lines.append(f"  {s}: for 60% of the null server's rate <= "
                         f"{_within(0.6 * null[s].msg_per_s, client):,.0f} µs, for 10x LocalStack's <= "
                         f"{_within(10 * ls[s].msg_per_s, client):,.0f} µs; the stack spends "
                         f"{sum(ours[s].cpu_us_per_message.values()):,.0f} µs and the null server "
                         f"{sum(null[s].cpu_us_per_message.values()):,.0f} µs")
    lines += ["", "CPU per acknowledged message, per process (idle: % of one core):"]
    for name, by_scenario in results.items():
        for scenario in measured:
            cpu = by_scenario[scenario].cpu_us_per_message
            if not cpu:
                continue
            unit = "%" if scenario == "idle" else " µs"
            parts = ", ".join(f"{p} {v:,.{1 if scenario == 'idle' else 0}f}{unit}" for p, v in cpu.items())
            total = sum(cpu.values())
            client = by_scenario[scenario].client_us_per_message
            beside = f" (the client: {client:,.0f} µs)" if client is not None else ""
            lines.append(f"  {name:12} {scenario:19} total {total:,.{1 if scenario == 'idle' else 0}f}{unit}: "
                         f"{parts}{beside}")
    return lines


def _within(rate: float, client_us: float) -> float:
    """The most CPU per message (µs) a target may spend and still move ``rate`` messages a second on this
    machine's cores beside a client spending ``client_us``: negative when the client alone cannot go that fast."""
    return (os.cpu_count() or 1) * 1e6 / max(rate, 1.0) - client_us


def chart(results: dict[str, dict[str, Result]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no chart: matplotlib is not installed (pip install 'ferrymq[bench]')", file=sys.stderr)
        return
    scenarios = THROUGHPUT
    names = list(results)
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        values = [results[name][s].msg_per_s for s in scenarios]
        ax.bar([x + i * width for x in range(len(scenarios))], values, width, label=name)
    ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(scenarios))], scenarios)
    ax.set_ylabel("messages per second")
    ax.set_title("One SigV4 client, 16 connections, 256-byte messages, 2 cores")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"chart: {path}")


@contextlib.contextmanager
def _data_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ferrymq-compare-") as tmp:
        yield Path(tmp)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each scenario")
    parser.add_argument("--targets", default="null,localstack,ferrymq-rf1,ferrymq")
    parser.add_argument("--localstack-python", help="an interpreter with localstack-core installed")
    parser.add_argument("--chart", type=Path, help="write a PNG chart of the throughput figures here")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help="which scenarios, comma-separated (e.g. 'idle' with --seconds 60 for the idle cost alone)")
    args = parser.parse_args()
    scenarios = tuple(s.strip() for s in args.scenarios.split(",") if s.strip())
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown or not scenarios:
        parser.error(f"scenarios are some of {', '.join(SCENARIOS)}; not {', '.join(sorted(unknown)) or 'none'}")
    wanted = [t.strip() for t in args.targets.split(",") if t.strip()]
    if "localstack" in wanted and not args.localstack_python:
        print("skipping localstack: no --localstack-python given", file=sys.stderr)
        wanted.remove("localstack")
    results: dict[str, dict[str, Result]] = {}
    with _data_dir() as tmp, multiprocessing.get_context("spawn").Pool(1) as pool:
        servers: dict[str, Server] = {
            "null": ChildServer("null", [sys.executable, str(HERE / "null_sqs_server.py")], "NULL_SQS_READY"),
            "localstack": LocalStack(args.localstack_python or "", _free_port()),
            "ferrymq-rf1": FerryMQ("ferrymq-rf1", tmp / "rf1", FERRYMQ_WORKERS="1", FERRYMQ_REPLICATION_FACTOR="1"),
            "ferrymq": FerryMQ("ferrymq", tmp / "default"),
        }
        for name in wanted:
            if name not in servers and name.startswith(GATEWAYS_TARGET):
                # e.g. ferrymq-gw2: the default stack with two gateway processes on its port
                count = name.removeprefix(GATEWAYS_TARGET)
                servers[name] = FerryMQ(name, tmp / name, FERRYMQ_GATEWAY_PROCESSES=count)
            if name not in servers:
                parser.error(f"no target {name}: the targets are {', '.join(servers)} and {GATEWAYS_TARGET}N")
            print(f"measuring {name} ...", file=sys.stderr, flush=True)
            results[name] = measure(servers[name], args.seconds, pool, scenarios)
    print("\n".join(report(results)))
    if args.chart and set(THROUGHPUT) <= set(scenarios):
        chart(results, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
