"""CPU the front end's request pipeline spends per warm request, without the HTTP server in the way.

    ferrymq up                                     # in another shell (FERRYMQ_DATA_DIR as below)
    python benchmarks/frontend_bench.py --data-dir ~/.local/share/ferrymq

It builds the same pipeline the gateway hosts, pointed at the running stack's AWS stand-in and workers,
signs each request once, and times ``Frontend.handle`` in process CPU time: sequentially, and with many
requests in flight so they share worker round trips as they do under load. It prints figures and asserts
nothing. DESIGN.md's budget for a warm SendMessage is 150 µs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from inprocess_frontend import attach, signed

from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.pipeline import Frontend
from ferrymq.frontend.wiring import build_frontend
from ferrymq.settings import Settings


async def cpu_per_request(frontend: Frontend, request: HttpRequest, total: int, in_flight: int) -> float:
    async def loop(n: int) -> None:
        for _ in range(n):
            response = await frontend.handle(request)
            if response.status != 200:
                raise RuntimeError(response.body[:200])

    await asyncio.gather(*(loop(20) for _ in range(in_flight)))
    started = time.process_time()
    await asyncio.gather(*(loop(total // in_flight) for _ in range(in_flight)))
    return (time.process_time() - started) / (total // in_flight * in_flight) * 1e6


async def run(frontend: Frontend, total: int) -> None:
    created = await frontend.handle(signed("CreateQueue", {"QueueName": "frontend-bench"}))
    url = json.loads(created.body)["QueueUrl"]
    cases = {
        "GetQueueUrl (no worker call)": signed("GetQueueUrl", {"QueueName": "frontend-bench"}),
        "SendMessage, 256 B": signed("SendMessage", {"QueueUrl": url, "MessageBody": "x" * 256}),
        "SendMessageBatch, 10 x 256 B": signed(
            "SendMessageBatch",
            {"QueueUrl": url, "Entries": [{"Id": str(i), "MessageBody": "x" * 256} for i in range(10)]},
        ),
    }
    for label, request in cases.items():
        sequential = await cpu_per_request(frontend, request, total, 1)
        concurrent = await cpu_per_request(frontend, request, total, 32)
        print(f"{label:<32} {sequential:8.1f} µs sequential   {concurrent:8.1f} µs with 32 in flight")
    await frontend.handle(signed("PurgeQueue", {"QueueUrl": url}))
    await frontend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Settings().data_dir, help="the running stack's data dir")
    parser.add_argument("--requests", type=int, default=3200)
    args = parser.parse_args()
    settings = attach(args.data_dir)
    asyncio.run(run(build_frontend(settings), args.requests))


if __name__ == "__main__":
    main()
