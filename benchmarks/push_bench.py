"""Push delivery figures: latency from SendMessage to an HTTP receiver, and throughput at batch size 10.

    python benchmarks/push_bench.py                      # starts its own `ferrymq up` in a temporary directory
    python benchmarks/push_bench.py --endpoint URL       # a running stack, signing with the dev key

Latency: ``--latency-messages`` messages sent one at a time, ``--gap`` seconds apart, to a queue mapped to a
receiver on loopback; each body carries its send time (taken just before SendMessage), and the receiver notes
when it arrives. Throughput: ``--backlog`` messages queued before a mapping of their queue is made (batch size 10,
``--concurrency`` batches at once), timed from the first delivery to the last. It prints
figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import ferrymq
from ferrymq.infra.up_process import UpProcess, up_environment


class Arrivals:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.at: dict[str, float] = {}
        self.condition = threading.Condition(self.lock)

    def wait_for(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.condition:
            while len(self.at) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.condition.wait(left)
        return True


def serve(arrivals: Arrivals) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            now = time.time()
            with arrivals.condition:
                for record in json.loads(body)["Records"]:
                    arrivals.at.setdefault(record["body"], now)
                arrivals.condition.notify_all()
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(endpoint: str, args: argparse.Namespace) -> None:
    keys = {"endpoint_url": endpoint, "region_name": "us-east-1", "aws_access_key_id": args.access_key,
            "aws_secret_access_key": args.secret_key}
    sqs: Any = ferrymq.client("sqs", **keys)
    api: Any = ferrymq.client("ferrymq", **keys)
    arrivals = Arrivals()
    server = serve(arrivals)
    url = f"http://127.0.0.1:{server.server_address[1]}/push"
    try:
        queue = sqs.create_queue(QueueName=f"push-bench-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        mapping = api.create_event_source_mapping(EventSourceArn=arn, Destination={"Url": url}, BatchSize=10,
                                                  ScalingConfig={"MaximumConcurrency": args.concurrency})["UUID"]
        # The poller starts at its host's next pass: a first message tells when it delivers.
        sqs.send_message(QueueUrl=queue, MessageBody="warm-up")
        arrivals.wait_for(1, 60)
        sent: dict[str, float] = {}
        for i in range(args.latency_messages):
            body = f"latency {i}"
            sent[body] = time.time()
            sqs.send_message(QueueUrl=queue, MessageBody=body)
            time.sleep(args.gap)
        arrivals.wait_for(1 + args.latency_messages, 120)
        latencies = [(arrivals.at[b] - t) * 1000 for b, t in sent.items() if b in arrivals.at]
        print(f"latency SendMessage -> receiver ({len(latencies)} messages, one every {args.gap * 1000:.0f} ms): "
              f"p50 {statistics.median(latencies):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms, "
              f"max {max(latencies):.1f} ms")
        api.delete_event_source_mapping(UUID=mapping)
        sqs.delete_queue(QueueUrl=queue)
        backlog = sqs.create_queue(QueueName=f"push-bench-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=backlog, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        for start in range(0, args.backlog, 10):
            sqs.send_message_batch(QueueUrl=backlog, Entries=[{"Id": str(i), "MessageBody": f"backlog {start + i}"}
                                                              for i in range(10)])
        before = len(arrivals.at)
        mapping = api.create_event_source_mapping(EventSourceArn=arn, Destination={"Url": url}, BatchSize=10,
                                                  ScalingConfig={"MaximumConcurrency": args.concurrency})["UUID"]
        arrivals.wait_for(before + args.backlog, 600)
        with arrivals.lock:
            times = sorted(t for b, t in arrivals.at.items() if b.startswith("backlog "))
        took = times[-1] - times[0]
        print(f"throughput at batch size 10, MaximumConcurrency {args.concurrency}: {args.backlog} messages in "
              f"{took:.1f} s from the first delivery to the last = {args.backlog / took:.0f} messages/s")
        api.delete_event_source_mapping(UUID=mapping)
        sqs.delete_queue(QueueUrl=backlog)
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="a running stack (default: start one)")
    parser.add_argument("--access-key", default="test")
    parser.add_argument("--secret-key", default="test")
    parser.add_argument("--latency-messages", type=int, default=300)
    parser.add_argument("--gap", type=float, default=0.02)
    parser.add_argument("--backlog", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args()
    if args.endpoint:
        run(args.endpoint, args)
        return
    with tempfile.TemporaryDirectory() as scratch:
        stack = UpProcess(Path(scratch), up_environment(Path(scratch)))
        stack.start()
        try:
            run(stack.endpoint, args)
        finally:
            stack.stop()


if __name__ == "__main__":
    main()
