"""What server-side encryption costs: CPU per message to seal and open with a cached data key, and send
throughput through the front end's pipeline with SSE on and off.

    ferrymq up                                     # in another shell (FERRYMQ_DATA_DIR as below)
    python benchmarks/sse_bench.py --data-dir ~/.local/share/ferrymq

Data keys come from the running stack's KMS (its stand-in), as the gateway gets them; the pipeline is the one
the gateway hosts (as in frontend_bench.py), each request signed once.  Per-message figures are process CPU
time over many messages on one warm key; throughput is wall-clock with 32 requests in flight.  It prints
figures and asserts nothing; the target is 20 µs per message each way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from pathlib import Path

from inprocess_frontend import attach, signed

from ferrymq.clock import SystemClock
from ferrymq.frontend.encryption import MessageCipher
from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.pipeline import Frontend
from ferrymq.frontend.wiring import build_cipher, build_frontend
from ferrymq.rpc.messages import sent_message
from ferrymq.settings import Settings

QUEUE_ARN = "arn:aws:sqs:us-east-1:000000000000:sse-bench"


async def per_message(cipher: MessageCipher, size: int, attributes: bool, count: int) -> tuple[float, float]:
    """CPU µs per message to seal, and to open, ``count`` messages of ``size`` bytes one at a time."""
    attrs = {"kind": {"DataType": "String", "StringValue": "order"}} if attributes else {}
    messages = [sent_message(str(uuid.uuid4()), "x" * size, attrs, "0" * 32, "1" * 32 if attrs else None, {})
                for _ in range(count)]
    await cipher.seal(QUEUE_ARN, {}, [dict(messages[0])])  # the data key, fetched once
    started = time.process_time()
    for m in messages:
        await cipher.seal(QUEUE_ARN, {}, [m])
    sealed = (time.process_time() - started) / count * 1e6
    started = time.process_time()
    for m in messages:
        await cipher.open({}, [m])
    opened = (time.process_time() - started) / count * 1e6
    return sealed, opened


async def sends(frontend: Frontend, request: HttpRequest, total: int, in_flight: int) -> tuple[float, float]:
    """(CPU µs per request, requests per second) for ``total`` requests, ``in_flight`` at a time."""

    async def loop(n: int) -> None:
        for _ in range(n):
            response = await frontend.handle(request)
            if response.status != 200:
                raise RuntimeError(response.body[:200])

    await asyncio.gather(*(loop(10) for _ in range(in_flight)))
    done = total // in_flight * in_flight
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(loop(total // in_flight) for _ in range(in_flight)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / done * 1e6, done / wall


async def run(settings: Settings, total: int) -> None:
    cipher = build_cipher(settings, SystemClock())
    print("per message, cached data key (CPU)           seal        open")
    for size, attributes in ((256, False), (1024, False), (1024, True), (64 * 1024, False)):
        sealed, opened = await per_message(cipher, size, attributes, 20_000 if size <= 1024 else 2_000)
        label = f"{size} B body" + (" + 1 attribute" if attributes else "")
        print(f"  {label:<42} {sealed:6.1f} µs   {opened:6.1f} µs")

    frontend = build_frontend(settings)
    urls = {}
    for label, attributes in (("SSE off", {"SqsManagedSseEnabled": "false"}), ("SSE-SQS", {})):
        name = f"sse-bench-{'off' if attributes else 'on'}"
        created = await frontend.handle(signed("CreateQueue", {"QueueName": name, "Attributes": attributes}))
        urls[label] = json.loads(created.body)["QueueUrl"]
    print("send through the front end, 32 in flight      CPU/request   requests/s   messages/s")
    for label, url in urls.items():
        for kind, request, per in (
            ("SendMessage 1 KiB", signed("SendMessage", {"QueueUrl": url, "MessageBody": "x" * 1024}), 1),
            ("SendMessageBatch 10 x 1 KiB", signed("SendMessageBatch", {"QueueUrl": url, "Entries": [
                {"Id": str(i), "MessageBody": "x" * 1024} for i in range(10)]}), 10),
        ):
            cpu, rate = await sends(frontend, request, total, 32)
            print(f"  {label:<8} {kind:<34} {cpu:8.1f} µs  {rate:9.0f}  {rate * per:11.0f}")
    for url in urls.values():
        await frontend.handle(signed("PurgeQueue", {"QueueUrl": url}))
    await frontend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Settings().data_dir, help="the running stack's data dir")
    parser.add_argument("--requests", type=int, default=3200)
    args = parser.parse_args()
    settings = attach(args.data_dir).with_(usage_enabled=False)
    asyncio.run(run(settings, args.requests))


if __name__ == "__main__":
    main()
