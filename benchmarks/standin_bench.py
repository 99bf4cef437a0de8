"""Latency of the durable AWS stand-in as FerryMQ's processes see it: boto3 over loopback, keep-alive.

    python benchmarks/standin_bench.py [--requests 500]

Starts ``python -m ferrymq.infra.standin`` on a temporary directory, then times DynamoDB GetItem (a read), PutItem
(journaled and fsynced) and a conditional PutItem that fails (nothing journaled). It prints p50 and p99 in
milliseconds and asserts nothing. It also times, in this process, the SigV4 check every request pays before it
reaches moto (the stand-in accepts only its own key pair).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import boto3

from ferrymq.infra.standin import layout


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.99) - 1] * 1000


def _time(label: str, requests: int, call: Callable[[int], Any]) -> None:
    for i in range(min(50, requests)):
        call(i)
    samples = []
    for i in range(requests):
        started = time.perf_counter()
        call(i)
        samples.append(time.perf_counter() - started)
    p50, p99 = _percentiles(samples)
    print(f"{label:<28} p50 {p50:6.2f} ms   p99 {p99:6.2f} ms   ({requests} requests)")


def _signature_check_cost(requests: int) -> None:
    """Microseconds the stand-in spends verifying one signed GetItem (the signing key is cached, as when serving)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from ferrymq.infra.standin.access_keys import KeyPair
    from ferrymq.infra.standin.request_auth import RequestVerifier

    body = b'{"TableName": "bench", "Key": {"pk": {"S": "hot"}}}'
    request = AWSRequest("POST", "http://127.0.0.1:4566/", data=body, headers={
        "X-Amz-Target": "DynamoDB_20120810.GetItem", "Content-Type": "application/x-amz-json-1.0"})
    SigV4Auth(Credentials("test", "test"), "dynamodb", "us-east-1").add_auth(request)
    scope = {"type": "http", "method": "POST", "path": "/", "raw_path": b"/", "query_string": b"",
             "headers": [(k.lower().encode(), v.encode() if isinstance(v, str) else v)
                         for k, v in [("host", "127.0.0.1:4566"), *request.headers.items()]]}
    verifier = RequestVerifier(KeyPair("test", "test"))
    if verifier.check(scope, body) is not None:
        raise SystemExit("the benchmark's own request does not verify")
    started = time.perf_counter()
    for _ in range(requests):
        verifier.check(scope, body)
    per_request = (time.perf_counter() - started) / requests * 1e6
    print(f"{'SigV4 check (in process)':<28} {per_request:6.1f} µs per request   ({requests} requests)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        # The stand-in accepts only this pair: every request below pays its signature check.
        process = subprocess.Popen(
            [sys.executable, "-m", "ferrymq.infra.standin", "--port", "0", "--data-dir", data_dir],
            stdout=subprocess.PIPE, text=True,
            env={**os.environ, "FERRYMQ_STANDIN_ACCESS_KEY_ID": "test", "FERRYMQ_STANDIN_SECRET_ACCESS_KEY": "test"},
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            if not line.startswith(layout.READY_PREFIX):
                raise SystemExit(f"the stand-in did not start: {line!r}")
            dynamodb = boto3.client("dynamodb", endpoint_url=line.split()[1], region_name="us-east-1",
                                    aws_access_key_id="test", aws_secret_access_key="test")
            dynamodb.create_table(
                TableName="bench", BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            )
            dynamodb.put_item(TableName="bench", Item={"pk": {"S": "hot"}, "v": {"S": "x" * 100}})
            _time("GetItem", args.requests,
                  lambda i: dynamodb.get_item(TableName="bench", Key={"pk": {"S": "hot"}}))
            _time("PutItem (journaled)", args.requests,
                  lambda i: dynamodb.put_item(TableName="bench", Item={"pk": {"S": f"k{i}"}, "v": {"N": str(i)}}))

            def failing_put(i: int) -> None:
                with contextlib.suppress(dynamodb.exceptions.ConditionalCheckFailedException):
                    dynamodb.put_item(TableName="bench", Item={"pk": {"S": "hot"}},
                                      ConditionExpression="attribute_not_exists(pk)")

            _time("PutItem, condition fails", args.requests, failing_put)
            _signature_check_cost(max(args.requests, 2000))
        finally:
            process.terminate()
            process.wait()


if __name__ == "__main__":
    main()
