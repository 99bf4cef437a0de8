"""What throttling costs: the bucket check on every request, and a whole throttled request.

    python benchmarks/throttle_bench.py                       # the throttle's own figures
    ferrymq up                                                # in another shell, then also the pipeline's:
    python benchmarks/throttle_bench.py --data-dir ~/.local/share/ferrymq

The first part times the throttle alone (admitting, refusing, and the pipeline's view that parses the queue
URL and reads the cached FIFO mode). With a running stack, the second builds the gateway's pipeline in this
process, with the FIFO quota lowered so one queue is throttled, and times ``Frontend.handle`` in process CPU
time for a warm SendMessage that is admitted and one that is throttled, on both protocols. It prints figures
and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

from inprocess_frontend import HOST, attach, signed

from ferrymq.clock import SystemClock
from ferrymq.errors import SqsError
from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.pipeline import Frontend
from ferrymq.frontend.throttle import RequestThrottle, Throttle
from ferrymq.frontend.wiring import build_frontend
from ferrymq.settings import Settings

ACCOUNT = "000000000000"


def _per_call(fn: Any, n: int) -> float:
    started = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - started) / n * 1e6


class _NoCatalog:
    def cached(self, account: str, name: str, region: str | None = None) -> None:
        return None


# Rates no loop here can reach, so every admitting call is admitted.
_UNREACHABLE = Settings(throttle_account_rate=1e12, throttle_action_rate=1e12, throttle_queue_rate=1e12,
                        throttle_fifo_rate=1e12)


def throttle_alone(n: int) -> None:
    admitting = Throttle(_UNREACHABLE, SystemClock())
    refusing = Throttle(Settings(throttle_fifo_rate=1e-9), SystemClock())
    queue = (ACCOUNT, "us-east-1", "bench.fifo")
    refusing.admit(ACCOUNT, "SendMessage", queue, False)
    view = RequestThrottle(Throttle(_UNREACHABLE, SystemClock()), _NoCatalog(), "us-east-1")  # type: ignore[arg-type]
    params = {"QueueUrl": f"http://{HOST}/{ACCOUNT}/bench"}

    print(f"{'Throttle.admit, admitted (4 buckets)':<48} {_per_call(lambda: admitting.admit(ACCOUNT, 'SendMessage', queue, False), n):6.2f} µs")  # noqa: E501
    print(f"{'Throttle.admit, refused (FIFO quota)':<48} {_per_call(lambda: refusing.admit(ACCOUNT, 'SendMessage', queue, False), n):6.2f} µs")  # noqa: E501
    print(f"{'RequestThrottle.check (URL parse + admit)':<48} {_per_call(lambda: view.check('json', ACCOUNT, 'us-east-1', 'SendMessage', params, None), n):6.2f} µs")  # noqa: E501


async def _cpu(frontend: Frontend, request: HttpRequest, n: int, status: int) -> float:
    for _ in range(20):
        await frontend.handle(request)
    started = time.process_time()
    for _ in range(n):
        response = await frontend.handle(request)
        if response.status != status:
            raise RuntimeError(response.body[:300])
    return (time.process_time() - started) / n * 1e6


async def pipeline(frontend: Frontend, n: int) -> None:
    async def create(name: str) -> str:
        response = await frontend.handle(signed("CreateQueue", {"QueueName": name,
                                                                          "Attributes": {"FifoQueue": "true"}}))
        if response.status != 200:
            raise SqsError(response.body.decode())
        return str(json.loads(response.body)["QueueUrl"])

    # The FIFO quota (lowered) throttles the FIFO queue; the standard queue is never throttled.
    fifo = await create(f"throttle-bench-{uuid.uuid4().hex[:8]}.fifo")
    standard_response = await frontend.handle(signed("CreateQueue", {"QueueName": "throttle-bench"}))
    standard = json.loads(standard_response.body)["QueueUrl"]
    for protocol in ("json", "query"):
        admitted = signed("SendMessage", {"QueueUrl": standard, "MessageBody": "x" * 256}, protocol)
        throttled_send = {"QueueUrl": fifo, "MessageBody": "x" * 256, "MessageGroupId": "g",
                          "MessageDeduplicationId": "d"}
        throttled = signed("SendMessage", throttled_send, protocol)
        refused_status = 400 if protocol == "json" else 403
        ok = await _cpu(frontend, admitted, n, 200)
        refused = await _cpu(frontend, throttled, n, refused_status)
        print(f"{protocol:<5} SendMessage admitted {ok:8.1f} µs   throttled {refused:8.1f} µs"
              f"   ({refused / ok:.0%} of an admitted one)")
    await frontend.handle(signed("PurgeQueue", {"QueueUrl": standard}))
    await frontend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="a running stack's data dir: also time the pipeline")
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    throttle_alone(args.requests * 50)
    if args.data_dir is None:
        return
    # Usage records off: they would time the usage buffer too, the same for both kinds of request.
    settings = attach(args.data_dir).with_(throttle_fifo_rate=1e-9, usage_enabled=False)
    asyncio.run(pipeline(build_frontend(settings), args.requests))


if __name__ == "__main__":
    main()
