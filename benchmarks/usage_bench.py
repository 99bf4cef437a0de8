"""What recording usage costs a request, and how fast the flusher turns records into objects.

    python benchmarks/usage_bench.py [--requests 200000]

Times ``UsageRecorder.record`` (everything the request path pays: finding the queue and its cached SSE
setting, appending one tuple to the buffer) for typical requests, in process CPU time per call, and the
flushes in between (building records, measuring payloads, gzipped JSON Lines to a sink that only counts the
bytes): that work runs in the flusher thread, off the request path, but shares the GIL. Prints figures and asserts
nothing; the budget is 5 µs per request.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.errors import InvalidClientTokenId
from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.usage import UsageRecorder
from ferrymq.usage.writer import UsageWriter

CHUNK = 5000  # the default usage_flush_records
URL = "http://127.0.0.1:9324/000000000000/bench"
AUTH = "AWS4-HMAC-SHA256 Credential=test/20261122/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=x"


class CountingSink:
    def __init__(self) -> None:
        self.bytes = 0

    def put(self, key: str, body: bytes) -> None:
        self.bytes += len(body)


def _case(action: str, params: dict[str, Any], result: dict[str, Any], error: Exception | None = None,
          ) -> dict[str, Any]:
    request = HttpRequest("POST", "/", "", {"authorization": AUTH, "user-agent": "Boto3/1.44.5 md/Botocore#1.44.5",
                                            "x-amz-target": f"AmazonSQS.{action}"}, json.dumps(params).encode(),
                          peer="127.0.0.1")
    return {"request": request, "request_id": "6f1c0a52-3c1e-4d5e-9a0b-1f2e3d4c5b6a", "arrived": 1_763_854_867.25,
            "latency": 0.00042, "response_bytes": 300, "account": None if error else "000000000000",
            "action": None if error else action,
            "params": None if error else params, "path_queue_url": None, "result": result, "error": error,
            "region": None if error else "us-east-1",
            "status": 403 if error else 200}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    args = parser.parse_args()
    queue = QueueRecord("000000000000", "bench", "q", 0)
    cases = {
        "SendMessage, 256 B": _case("SendMessage", {"QueueUrl": URL, "MessageBody": "x" * 256}, {"MessageId": "m"}),
        "SendMessageBatch, 10 x 256 B": _case(
            "SendMessageBatch",
            {"QueueUrl": URL, "Entries": [{"Id": str(i), "MessageBody": "x" * 256} for i in range(10)]},
            {"Successful": [{}] * 10, "Failed": []}),
        "ReceiveMessage, 10 messages": _case(
            "ReceiveMessage", {"QueueUrl": URL, "MaxNumberOfMessages": 10},
            {"Messages": [{"Body": "x" * 256, "ReceiptHandle": "r"} for _ in range(10)]}),
        "GetQueueUrl": _case("GetQueueUrl", {"QueueName": "bench"}, {"QueueUrl": URL}),
        "refused signature (parses again)": _case("SendMessage", {"QueueUrl": URL, "MessageBody": "x" * 256}, {},
                                                   InvalidClientTokenId()),
    }
    with tempfile.TemporaryDirectory() as spool:
        sink = CountingSink()
        recorders: list[UsageRecorder] = []
        writer = UsageWriter(sink, Path(spool), "bench", flush_records=10**9, flush_bytes=2**62,
                             finish=lambda raw: recorders[0].build(raw))
        recorders.append(UsageRecorder(writer, region="us-east-1", queue_lookup=lambda a, n, r: queue))
        recorder = recorders[0]
        flushed, flush_time = 0, 0.0
        print(f"request-path cost of recording usage ({args.requests} calls each, CPU time):")
        for label, kwargs in cases.items():
            for _ in range(1000):  # warm-up
                recorder.record(**kwargs)
            spent = 0.0
            # In chunks of a flush's worth, flushed untimed in between, as the flusher thread keeps the buffer
            # short in a running gateway (a buffer of a million records would time the garbage collector).
            for _ in range(args.requests // CHUNK):
                started = time.process_time()
                for _ in range(CHUNK):
                    recorder.record(**kwargs)
                spent += time.process_time() - started
                flushed += writer.pending()
                started = time.perf_counter()
                writer.flush()
                flush_time += time.perf_counter() - started
            per_call = spent / (args.requests // CHUNK * CHUNK) * 1e6
            print(f"  {label:<34} {per_call:6.2f} µs per request")
        print(f"flusher: {flushed} records -> {sink.bytes / 1e6:.1f} MB gzipped JSON Lines in {flush_time:.2f} s "
              f"({flushed / flush_time:,.0f} records/s, {sink.bytes / flushed:.0f} B/record; its CPU shares the "
              f"GIL with requests: {flush_time / flushed * 1e6:.1f} µs per record)")


if __name__ == "__main__":
    main()
