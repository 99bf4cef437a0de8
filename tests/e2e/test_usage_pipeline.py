"""Usage records end to end: real traffic through ``ferrymq up`` with boto3 becomes records in the stand-in's
S3, ``ferrymq spark billing`` invoices exactly those requests with their 64 KiB units; and with S3 unreachable
requests still succeed, records spool to disk, and after a ``kill -9`` and a restart every record arrives once.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from ferrymq.infra.up_process import ferrymq_command
from tests.e2e.conftest import Stack
from tests.support.sqs_clients import sqs_client
from tests.support.tcp_proxy import SwitchableProxy

ACCOUNT = "000000000000"
BUCKET = "ferrymq-usage"
KIB = 1024
FLUSH_ENV = {"FERRYMQ_USAGE_FLUSH_SECONDS": "0.3", "FERRYMQ_USAGE_UPLOAD_ATTEMPTS": "2"}


def _s3(stack: Stack) -> Any:
    return stack.aws_client("s3", config=Config(s3={"addressing_style": "path"}))


def _records(s3: Any) -> list[dict[str, Any]]:
    found = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="usage/v1/"):
        for item in page.get("Contents", ()):
            body = gzip.decompress(s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read())
            found += [json.loads(line) for line in body.splitlines()]
    return found


def _wait_for(condition: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def _records_when(s3: Any, ready: Any) -> list[dict[str, Any]]:
    """The bucket's records once ``ready(records)`` holds (or what is there after the wait)."""
    found: list[dict[str, Any]] = []

    def check() -> bool:
        nonlocal found
        found = _records(s3)
        return bool(ready(found))

    _wait_for(check)
    return found


def _units(payload: int) -> int:
    return max(1, math.ceil(payload / (64 * KIB)))


def _traffic(sqs: Any) -> tuple[set[str], int]:
    """Sends, batches, receives, deletes and an error; returns their request ids and billable units."""
    ids: set[str] = set()
    units = 0

    def call(name: str, payload: int = 0, **params: Any) -> dict[str, Any]:
        nonlocal units
        answer = getattr(sqs, name)(**params)
        ids.add(answer["ResponseMetadata"]["RequestId"])
        units += _units(payload)
        return answer

    url = call("create_queue", QueueName="usage-e2e")["QueueUrl"]
    call("send_message", 5, QueueUrl=url, MessageBody="hello")
    call("send_message", 100 * KIB, QueueUrl=url, MessageBody="x" * (100 * KIB))
    call("send_message", 200 * KIB + 20, QueueUrl=url, MessageBody="y" * (200 * KIB),
         MessageAttributes={"kind": {"DataType": "String", "StringValue": "big"}})  # 4 + 6 + 3 + 7 attribute bytes
    call("send_message_batch", 10 * 10 * KIB, QueueUrl=url,
         Entries=[{"Id": str(i), "MessageBody": "z" * (10 * KIB)} for i in range(10)])
    call("send_message_batch", 3, QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "b"} for i in range(3)])
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    ids.add(received["ResponseMetadata"]["RequestId"])
    out = sum(len(m["Body"]) + sum(len(k) + len(v["DataType"]) + len(v.get("StringValue", ""))
                                   for k, v in m.get("MessageAttributes", {}).items())
              for m in received.get("Messages", []))
    units += _units(out)
    call("delete_message", QueueUrl=url, ReceiptHandle=received["Messages"][0]["ReceiptHandle"])
    with pytest.raises(ClientError) as missing:
        sqs.get_queue_url(QueueName="no-such-queue")
    ids.add(missing.value.response["ResponseMetadata"]["RequestId"])
    units += 1
    return ids, units


def test_invoice_counts_exactly_the_requests_made(tmp_path: Path) -> None:
    stack = Stack(tmp_path / "ferrymq", FLUSH_ENV)
    try:
        stack.start()
        sqs = sqs_client(stack.endpoint, "json")
        # Given traffic of the development account, and one refused signature:
        ids, units = _traffic(sqs)
        forged = sqs_client(stack.endpoint, "json", secret_key="wrong")
        with pytest.raises(ClientError) as refused:
            forged.list_queues()
        refused_id = refused.value.response["ResponseMetadata"]["RequestId"]
        s3 = _s3(stack)
        records = _records_when(s3, lambda found: len(found) >= len(ids) + 1)
        by_id = {r["request_id"]: r for r in records}
        assert set(by_id) == ids | {refused_id}
        assert (by_id[refused_id]["account"], by_id[refused_id]["action"]) == (None, "ListQueues")
        assert by_id[refused_id]["outcome"] == refused.value.response["Error"]["Code"]
        dates = sorted({r["ts"][:10] for r in records})

        # When billing runs for the day(s) of that traffic, through the command a developer uses:
        billed = Counter()
        for date in dates:
            subprocess.run([*ferrymq_command(), "spark", "billing", "--date", date], env=stack.env, check=True,
                           timeout=300, capture_output=True)
            invoice = s3.get_object(Bucket=BUCKET, Key=f"derived/billing/invoices/dt={date}/{ACCOUNT}.csv")
            for row in csv.DictReader(io.StringIO(invoice["Body"].read().decode())):
                if row["item"] == "requests_standard":
                    billed["units"] += int(row["quantity_day"])
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"derived/billing/invoices/dt={date}/")
                    .get("Contents", [])]
            # Then only the authenticated account is invoiced...
            assert keys == [f"derived/billing/invoices/dt={date}/{ACCOUNT}.csv"]

        # ...for exactly the requests made, each counted in 64 KiB units.
        assert billed["units"] == units
    finally:
        stack.stop()


def test_records_survive_an_unreachable_bucket_and_a_kill_9(tmp_path: Path) -> None:
    data_dir = tmp_path / "ferrymq"

    def standin() -> tuple[str, int]:
        parts = urlsplit((data_dir / "aws" / "endpoint").read_text().strip())
        return parts.hostname or "127.0.0.1", parts.port or 80

    proxy = SwitchableProxy(standin)
    stack = Stack(data_dir, {**FLUSH_ENV, "AWS_ENDPOINT_URL_S3": proxy.url})
    try:
        stack.start()
        sqs = sqs_client(stack.endpoint, "json")
        url = sqs.create_queue(QueueName="spooled")["QueueUrl"]
        first = _wait_for(lambda: _records(_s3(stack)))
        assert first, "the bucket was reachable: records should have arrived"
        # Given S3 unreachable from the gateway:
        proxy.enabled = False

        ids = {sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")["ResponseMetadata"]["RequestId"]
               for i in range(20)}

        # then requests still succeed, and their records reach the spool (0600 files).
        spool = data_dir / "usage-spool"

        def spooled() -> set[str]:
            found = set()
            for path in spool.glob("*.jsonl.gz"):
                assert path.stat().st_mode & 0o777 == 0o600
                found |= {json.loads(line)["request_id"] for line in gzip.decompress(path.read_bytes()).splitlines()}
            return found

        assert _wait_for(lambda: ids <= spooled()), "records were not spooled"
        # When the whole stack dies at once and comes back with S3 reachable again:
        stack.kill9_all()
        proxy.enabled = True
        stack.start()

        # then every spooled record arrives, once.
        s3 = _s3(stack)
        arrived = _records_when(s3, lambda found: ids <= {x["request_id"] for x in found})
        counts = Counter(r["request_id"] for r in arrived)
        assert all(counts[i] == 1 for i in ids)
        assert _wait_for(lambda: not list(spool.glob("*.jsonl.gz")))
    finally:
        stack.stop()
        proxy.close()
