"""Records per second of the usage jobs in local Spark, and of a single-process columnar engine on the same files.

    python benchmarks/usage_jobs_bench.py [--records 10000000] [--dir /tmp/ferrymq-usage-bench] [--keep]

Generates ``--records`` usage records for one day (24 hourly objects of gzipped JSON Lines, the writer's
layout, with a few malformed lines) under ``--dir``, then times, each from a cold start of its own work:

- the billing job and the analytics job, as ``spark/pipeline.py`` runs them, in ``local[2]``;
- the same aggregations as the billing usage lines and the hourly queue table in pyarrow (its JSON reader and
  ``group_by``, multi-threaded), as the reference for how close to this machine's limit the Spark path runs.

Prints figures and asserts nothing.  Local files, not S3: this measures the jobs, not the stand-in.
"""

from __future__ import annotations

import argparse
import gzip
import random
import shutil
import time
from pathlib import Path

import orjson

from ferrymq.usage import schema

DATE = "2026-11-21"
POOL = 20_000  # distinct records per hour, repeated (with new request ids) to reach the count


ACTIONS = ("SendMessage", "SendMessageBatch", "ReceiveMessage", "ReceiveMessage", "DeleteMessage",
           "DeleteMessageBatch", "ChangeMessageVisibility", "GetQueueUrl", "ListQueues")


def _record(rng: random.Random, hour: int) -> dict:
    account = f"{rng.randint(1, 50):012d}"
    action = rng.choice(ACTIONS)
    queue = None if action == "ListQueues" else f"q{rng.randint(1, 8)}" + (".fifo" if rng.random() < 0.2 else "")
    failed = rng.random() < 0.05
    messages_in = {"SendMessage": 1, "SendMessageBatch": 10, "DeleteMessage": 1, "DeleteMessageBatch": 10,
                   "ChangeMessageVisibility": 1}.get(action, 0)
    messages_out = rng.choice((0, 1, 10)) if action == "ReceiveMessage" and not failed else 0
    bytes_in, bytes_out = messages_in * rng.choice((200, 4096, 70_000)), messages_out * 1024
    return {
        "v": 1, "ts": f"{DATE}T{hour:02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z",
        "request_id": "", "account": account if rng.random() < 0.99 else None,
        "access_key_id": f"AKIA{account}", "queue_arn": queue and f"arn:aws:sqs:us-east-1:{account}:{queue}",
        "action": action, "outcome": "InvalidParameterValue" if failed else schema.SUCCESS,
        "http_status": 400 if failed else 200, "messages_in": messages_in, "entries_failed": 0,
        "bytes_in": bytes_in, "messages_out": messages_out, "bytes_out": bytes_out,
        "billable_units": schema.billable_units(bytes_in, bytes_out), "latency_ms": round(rng.uniform(0.2, 40), 3),
        "instance": "bench", "queue_type": queue and ("fifo" if queue.endswith(".fifo") else "standard"),
        "sse": "none", "kms_calls": 0, "source_ip": "198.51.100.7", "user_agent": "Boto3/1.44.5",
    }


def generate(root: Path, records: int) -> None:
    rng = random.Random(7)
    per_hour = records // 24
    serial = 0
    for hour in range(24):
        # Each pool record split around its request id, so every line gets an id of its own (the jobs keep one
        # record per id) without serialising ten million dicts.
        pool = []
        for _ in range(min(POOL, per_hour)):
            line = orjson.dumps({**_record(rng, hour), "request_id": "@ID@"}) + b"\n"
            head, _, tail = line.partition(b"@ID@")
            pool.append((head, tail))
        parts = []
        for i in range(per_hour):
            head, tail = pool[i % len(pool)]
            parts += (head, b"%016x" % (serial + i), tail)
        serial += per_hour
        body = b"".join(parts)
        if hour == 2:
            body += b"{not json\n" + b'{"v": 2}\n'
        path = root / f"dt={DATE}" / f"hour={hour:02d}" / f"bench-{hour}-000001.jsonl.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(body, compresslevel=1))


def spark_jobs(root: Path, out: Path, records: int) -> None:
    from ferrymq.spark import session
    from ferrymq.spark.io import Io
    from ferrymq.spark.pipeline import run_analytics, run_billing
    from ferrymq.spark.prices import Prices

    started = time.perf_counter()
    spark = session.build("ferrymq-bench", "local[2]")
    spark.range(1).count()
    print(f"spark session start: {time.perf_counter() - started:.1f} s")
    try:
        for name, job in (("billing", lambda io: run_billing(io, str(root), str(out), DATE, Prices.load())),
                          ("analytics", lambda io: run_analytics(io, str(root), str(out), DATE))):
            started = time.perf_counter()
            summary = job(Io(spark))
            elapsed = time.perf_counter() - started
            print(f"spark {name:<10} {elapsed:7.1f} s  {records / elapsed:>10,.0f} records/s  "
                  f"({summary['records']:,} records, {summary['quarantined']} quarantined)")
    finally:
        spark.stop()


def columnar(root: Path, records: int) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    started = time.perf_counter()
    tables = []
    for path in sorted(root.rglob("*.jsonl.gz")):
        # The malformed lines would stop pyarrow's reader: drop them first, as the jobs quarantine them.
        lines = [line for line in gzip.decompress(path.read_bytes()).splitlines(keepends=True)
                 if line.startswith(b'{"v":1,')]
        tables.append(pj.read_json(pa.BufferReader(b"".join(lines))))
    table = pa.concat_tables(tables)
    read = time.perf_counter() - started
    classes = pc.replace_substring_regex(table["action"], "^(SendMessage|SendMessageBatch)$", "send")
    table = table.append_column("action_class", classes)
    billed = table.filter(pc.is_valid(table["account"]))
    billed.group_by(["account", "queue_type", "action_class"]).aggregate(
        [("billable_units", "sum"), ("bytes_in", "sum"), ("bytes_out", "sum"), ("kms_calls", "sum"),
         ("request_id", "count")])
    hours = pc.utf8_slice_codeunits(table["ts"], 0, 13)
    queued = table.append_column("hour", hours).filter(pc.is_valid(table["queue_arn"]))
    queued.group_by(["queue_arn", "hour"]).aggregate(
        [("request_id", "count"), ("messages_in", "sum"), ("messages_out", "sum"),
         ("latency_ms", "approximate_median")])
    elapsed = time.perf_counter() - started
    print(f"pyarrow    both aggs {elapsed:7.1f} s  {records / elapsed:>10,.0f} records/s  "
          f"(of which reading JSON {read:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/ferrymq-usage-bench"))
    parser.add_argument("--keep", action="store_true", help="keep the generated files (and reuse them next time)")
    args = parser.parse_args()
    root = args.dir / "usage" / "v1"
    marker = args.dir / f"generated-{args.records}"
    if not marker.exists():
        shutil.rmtree(args.dir, ignore_errors=True)
        started = time.perf_counter()
        generate(root, args.records)
        marker.touch()
        size = sum(p.stat().st_size for p in root.rglob("*.gz"))
        print(f"generated {args.records:,} records ({size / 1e6:,.0f} MB gzipped) in "
              f"{time.perf_counter() - started:.0f} s")
    try:
        columnar(root, args.records)
        spark_jobs(root, args.dir / "derived", args.records)
    finally:
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
