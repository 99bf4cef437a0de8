"""Load a running FerryMQ stack with concurrent SigV4-signed SQS requests and print throughput and latency.

    python benchmarks/sqs_bench.py --endpoint http://127.0.0.1:9324 --seconds 10 --concurrency 32

Scenarios: SendMessage, SendMessageBatch (10 messages) and ReceiveMessage + DeleteMessageBatch, all over
the AWS JSON protocol on keep-alive connections. It prints figures and asserts nothing. The load runs in
``--processes`` separate processes so that signing requests does not starve one core of the client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


@dataclass
class Target:
    endpoint: str
    access_key: str
    secret_key: str
    region: str


class Connection:
    """One keep-alive HTTP/1.1 connection; requests on it go one at a time."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, head: bytes, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)


def signed(target: Target, action: str, payload: dict[str, Any]) -> tuple[bytes, bytes]:
    body = json.dumps(payload).encode()
    url = urlsplit(target.endpoint)
    request = AWSRequest(
        method="POST",
        url=f"{target.endpoint}/",
        data=body,
        headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}"},
    )
    SigV4Auth(Credentials(target.access_key, target.secret_key), "sqs", target.region).add_auth(request)
    lines = ["POST / HTTP/1.1", f"Host: {url.netloc}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in request.headers.items() if k.lower() not in ("host", "content-length")]
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), body


async def call(conn: Connection, target: Target, action: str, payload: dict[str, Any]) -> dict[str, Any]:
    head, body = signed(target, action, payload)
    status, data = await conn.request(head, body)
    if status != 200:
        raise RuntimeError(f"{action} answered {status}: {data[:200]!r}")
    return json.loads(data) if data else {}


async def scenario(target: Target, queue_url: str, name: str, seconds: float, concurrency: int,
                   ) -> tuple[list[float], int]:
    """Latencies of every request made, and how many messages they moved."""
    url = urlsplit(target.endpoint)
    latencies: list[float] = []
    moved = 0
    deadline = time.monotonic() + seconds

    async def loop() -> None:
        nonlocal moved
        conn = Connection(url.hostname or "127.0.0.1", url.port or 80)
        while time.monotonic() < deadline:
            started = time.perf_counter()
            if name == "SendMessage":
                await call(conn, target, "SendMessage", {"QueueUrl": queue_url, "MessageBody": "x" * 256})
                moved += 1
            elif name == "SendMessageBatch":
                entries = [{"Id": str(i), "MessageBody": "x" * 256} for i in range(10)]
                await call(conn, target, "SendMessageBatch", {"QueueUrl": queue_url, "Entries": entries})
                moved += 10
            else:
                got = await call(conn, target, "ReceiveMessage",
                                 {"QueueUrl": queue_url, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1})
                messages = got.get("Messages", [])
                if messages:
                    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
                    await call(conn, target, "DeleteMessageBatch", {"QueueUrl": queue_url, "Entries": entries})
                    moved += len(messages)
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return latencies, moved


def _run_process(args: tuple[Target, str, str, float, int]) -> tuple[list[float], int]:
    target, queue_url, name, seconds, concurrency = args
    return asyncio.run(scenario(target, queue_url, name, seconds, concurrency))


async def _create_queue(target: Target) -> str:
    url = urlsplit(target.endpoint)
    conn = Connection(url.hostname or "127.0.0.1", url.port or 80)
    got = await call(conn, target, "CreateQueue", {"QueueName": f"bench-{uuid.uuid4().hex[:8]}"})
    return got["QueueUrl"]


def report(name: str, latencies: list[float], seconds: float, moved: int) -> None:
    if not latencies:
        print(f"{name:<34} no requests completed")
        return
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    rate = len(latencies) / seconds
    print(f"{name:<34} {rate:>9.0f} req/s {moved / seconds:>9.0f} msg/s   p50 {p50:7.2f} ms   p99 {p99:7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default="http://127.0.0.1:9324")
    parser.add_argument("--access-key", default="test")
    parser.add_argument("--secret-key", default="test")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=32, help="connections per process")
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    target = Target(args.endpoint, args.access_key, args.secret_key, args.region)
    queue_url = asyncio.run(_create_queue(target))
    print(f"endpoint {args.endpoint}  queue {queue_url}  {args.processes} processes x {args.concurrency} connections")
    with multiprocessing.Pool(args.processes) as pool:
        for name in ("SendMessage", "SendMessageBatch", "ReceiveMessage+DeleteMessageBatch"):
            work = [(target, queue_url, name, args.seconds, args.concurrency)] * args.processes
            parts = pool.map(_run_process, work)
            latencies = [x for part, _ in parts for x in part]
            report(name, latencies, args.seconds, sum(moved for _, moved in parts))


if __name__ == "__main__":
    main()
