"""Throughput and latency of send / receive / delete straight against one storage worker, standard and FIFO.

    python benchmarks/worker_bench.py                      # starts its own worker (no partition map)
    python benchmarks/worker_bench.py --host H --port P    # uses a running worker

Every request goes through ``WorkerClient`` over loopback, so the figures include the RPC, the engine, the
log's group commit and its fdatasync.  The worker it starts requires the cluster-secret handshake (``--no-auth``:
not); the first phase opens a new connection per request, so its figures show what the handshake costs a connect.
The FIFO phases spread messages over ``--groups`` message groups and
consume them the way FIFO consumers must: receive, then delete, before the group hands out more.
Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from ferrymq.rpc.client import WorkerClient
from ferrymq.rpc.peer_auth import PeerAuth

REPO = Path(__file__).resolve().parent.parent
RETENTION = 345600


@dataclass
class Result:
    name: str
    requests: int
    messages: int
    seconds: float
    latencies: list[float]
    cpu: float

    def row(self) -> str:
        lat = sorted(self.latencies)

        def pct(p: float) -> float:
            return lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3 if lat else float("nan")

        return (
            f"{self.name:<34} {self.requests:>7} {self.messages / self.seconds:>10,.0f} "
            f"{self.requests / self.seconds:>10,.0f} {pct(0.5):>8.3f} {pct(0.99):>8.3f} {pct(0.999):>8.3f} "
            f"{self.cpu / self.requests * 1e6:>9.1f}"
        )


HEADER = (
    f"{'phase':<34} {'reqs':>7} {'msgs/s':>10} {'reqs/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>8} "
    f"{'cli µs/r':>9}"
)


def message(body: str) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "body": body,
        "attrs": {"kind": {"DataType": "String", "StringValue": "bench"}},
        "md5_body": "0" * 32,
        "md5_attrs": "1" * 32,
        "delay": 0,
        "system": {"SenderId": "AIDABENCH"},
    }


def fifo_message(body: str, group: int) -> dict:
    m = message(body)
    m["group"] = f"group-{group}"
    m["dedup_id"] = m["id"]
    return m


async def phase(name: str, requests: int, concurrency: int, call: Callable[[int], Awaitable[int]]) -> Result:
    """Run ``call(i)`` for i in range(requests) with ``concurrency`` callers; ``call`` returns messages handled."""
    latencies: list[float] = []
    counter = iter(range(requests))
    handled = 0

    async def caller() -> None:
        nonlocal handled
        for i in counter:
            t0 = time.perf_counter()
            count = await call(i)
            latencies.append(time.perf_counter() - t0)
            handled += count

    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    seconds = time.perf_counter() - t0
    return Result(name, requests, handled, seconds, latencies, time.process_time() - cpu0)


async def bench(host: str, port: int, n: int, body_size: int, groups: int, auth: PeerAuth | None) -> list[Result]:
    client = WorkerClient(host, port, auth=auth)
    await client.connect()
    body = "x" * body_size
    results: list[Result] = []

    async def connect_and_ping(_: int) -> int:
        fresh = WorkerClient(host, port, auth=auth)
        try:
            await fresh.ping()
        finally:
            await fresh.close()
        return 1

    results.append(await phase("new connection + ping, 1 in flight", 500, 1, connect_and_ping))
    q = f"bench-{uuid.uuid4()}"

    async def send_one(_: int) -> int:
        await client.send(0, q, [message(body)], retention_seconds=RETENTION)
        return 1

    async def send_ten(_: int) -> int:
        await client.send(0, q, [message(body) for _ in range(10)], retention_seconds=RETENTION)
        return 10

    receipts: list[str] = []

    async def receive_ten(_: int) -> int:
        got = await client.receive(0,
            q, max_messages=10, visibility_timeout=600, wait_seconds=0, retention_seconds=RETENTION
        )
        receipts.extend(m["receipt"] for m in got)
        return len(got)

    async def delete_ten(i: int) -> int:
        batch = receipts[i * 10 : i * 10 + 10]
        await client.delete(0, q, batch)
        return len(batch)

    async def delete_one(i: int) -> int:
        await client.delete(0, q, [receipts[i]])
        return 1

    await client.ping()
    results.append(await phase("send 1 msg, 1 in flight", max(n // 10, 200), 1, send_one))
    results.append(await phase("send 1 msg, 64 in flight", n, 64, send_one))
    results.append(await phase("send 10 msgs, 16 in flight", n // 10, 16, send_ten))
    total = results[0].messages + results[1].messages + results[2].messages
    results.append(await phase("receive up to 10, 1 in flight", 200, 1, receive_ten))
    results.append(await phase("receive up to 10, 16 in flight", (total - results[-1].messages) // 10, 16, receive_ten))
    half = len(receipts) // 2
    by_ten = half // 10
    results.append(await phase("delete 10 receipts, 16 in flight", by_ten, 16, delete_ten))
    receipts[:] = receipts[by_ten * 10 :]
    results.append(await phase("delete 1 receipt, 64 in flight", len(receipts), 64, delete_one))
    stats = await client.stats(0, q, retention_seconds=RETENTION)

    fq = f"bench-{uuid.uuid4()}.fifo"

    async def fifo_send_one(i: int) -> int:
        await client.send(0, fq, [fifo_message(body, i % groups)], retention_seconds=RETENTION, fifo=True)
        return 1

    async def fifo_send_ten(i: int) -> int:
        batch = [fifo_message(body, (i * 10 + k) % groups) for k in range(10)]
        await client.send(0, fq, batch, retention_seconds=RETENTION, fifo=True)
        return 10

    async def fifo_consume(_: int) -> int:
        got = await client.receive(0,
            fq, max_messages=10, visibility_timeout=600, wait_seconds=0, retention_seconds=RETENTION, fifo=True
        )
        if got:
            await client.delete(0, fq, [m["receipt"] for m in got])
        return len(got)

    results.append(await phase("fifo send 1 msg, 64 in flight", n, 64, fifo_send_one))
    results.append(await phase("fifo send 10 msgs, 16 in flight", n // 10, 16, fifo_send_ten))
    fifo_total = results[-1].messages + results[-2].messages
    results.append(await phase("fifo receive 10 + delete, 16 consumers", fifo_total // 10 + 200, 16, fifo_consume))
    fifo_stats = await client.stats(0, fq, retention_seconds=RETENTION)
    info = await client.ping()
    await client.close()
    print(f"left in queue: {stats}; left in FIFO queue: {fifo_stats}; worker: {info}")
    return results


def start_worker(data_dir: Path, secret: str | None) -> tuple[subprocess.Popen, str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRYMQ_CLUSTER_SECRET")}
    env["FERRYMQ_LOG_LEVEL"] = "ERROR"
    if secret:
        env["FERRYMQ_CLUSTER_SECRET"] = secret
    proc = subprocess.Popen(
        [sys.executable, "-m", "ferrymq.storage", "--no-register", "--port", "0", "--data-dir", str(data_dir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().split()
    if len(line) != 3 or line[0] != "FERRYMQ_WORKER_READY":
        proc.kill()
        raise SystemExit(f"worker did not start: {line}")
    return proc, line[1], int(line[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--messages", type=int, default=20000, help="messages per send phase (default 20000)")
    parser.add_argument("--body-size", type=int, default=256, help="message body size in bytes (default 256)")
    parser.add_argument("--groups", type=int, default=256, help="message groups of the FIFO phases (default 256)")
    parser.add_argument("--no-auth", action="store_true",
                        help="no cluster-secret handshake (a running worker: FERRYMQ_CLUSTER_SECRET names its secret)")
    args = parser.parse_args()
    secret = None if args.no_auth else (os.environ.get("FERRYMQ_CLUSTER_SECRET") or secrets.token_urlsafe(32))
    auth = PeerAuth(secret) if secret else None
    try:
        import uvloop

        run = uvloop.run
    except ImportError:
        run = asyncio.run
    proc = None
    with tempfile.TemporaryDirectory(prefix="ferrymq-bench-") as tmp:
        if args.port:
            host, port = args.host or "127.0.0.1", args.port
        else:
            proc, host, port = start_worker(Path(tmp), secret)
        try:
            results = run(bench(host, port, args.messages, args.body_size, args.groups, auth))
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
    print(f"worker {host}:{port}, body {args.body_size} B, {args.groups} FIFO groups, {os.cpu_count()} CPUs, "
          f"handshake {'off' if auth is None else 'on'}")
    print(HEADER)
    for r in results:
        print(r.row())


if __name__ == "__main__":
    main()
