"""A job against S3 over real sockets (the stand-in, or FERRYMQ_TEST_AWS_ENDPOINT): read and written through
the ``ferrymq_s3`` Python Data Source, since local Spark has no s3a, or fetched and written by the driver when
small; a rerun replaces the date's objects.
(Each figure of every job is checked on local files in tests/functional/spark; this checks the S3 path.)"""

from __future__ import annotations

import io
import uuid
from typing import Any

import pyarrow.parquet as pq
import pytest

from ferrymq.aws.session import client
from ferrymq.settings import Settings
from ferrymq.spark.io import Io
from ferrymq.spark.pipeline import run_billing
from ferrymq.spark.prices import Prices
from tests.support import usage_reference as reference
from tests.support.usage_log import generate

DATE = "2026-11-21"


def _objects(s3: Any, bucket: str, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(item["Key"] for page in pages for item in page.get("Contents", ()))


def _table(s3: Any, bucket: str, prefix: str) -> list[dict[str, Any]]:
    rows = []
    for key in _objects(s3, bucket, prefix):
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        rows += pq.read_table(io.BytesIO(body)).to_pylist()
    return rows


def test_billing_through_the_s3_data_source_twice(aws_settings: Settings, spark: Any) -> None:
    s3 = client("s3", aws_settings)
    bucket = aws_settings.usage_bucket
    run = uuid.uuid4().hex[:8]
    base = f"s3://{bucket}/spark-test-{run}"
    log, _ = generate((DATE,), per_hour=6, seed=5)
    for key, body in log.bodies().items():
        s3.put_object(Bucket=bucket, Key=f"spark-test-{run}/usage/v1/{key}", Body=body)
    jobs_io = Io(spark, endpoint_url=aws_settings.aws_endpoint_url, region=aws_settings.region, batch_bytes=0,
                 driver_rows=0)
    assert not jobs_io.native(base), "local Spark is not expected to have an s3 filesystem"
    prices = Prices.load()

    # The first run through the data source (as for a day too big for the driver), the rerun in one batch.
    first = run_billing(jobs_io, f"{base}/usage/v1", f"{base}/derived", DATE, prices)
    first_keys = _objects(s3, bucket, f"spark-test-{run}/derived/billing/charges/dt={DATE}/")
    summary = run_billing(Io(spark, endpoint_url=aws_settings.aws_endpoint_url), f"{base}/usage/v1",
                          f"{base}/derived", DATE, prices)

    records, bad = reference.parse(log.all_lines())
    assert (summary["records"], summary["quarantined"]) == (len(records), len(bad))
    assert (first["records"], first["quarantined"]) == (len(records), len(bad))
    charges = _table(s3, bucket, f"spark-test-{run}/derived/billing/charges/dt={DATE}/")
    expected = reference.charges(records, DATE, prices)
    assert {(r["account"], r["item"]): (r["quantity_day"], pytest.approx(r["amount_day"], abs=1e-12))
            for r in charges} == {k: (v["quantity_day"], v["amount_day"]) for k, v in expected.items()}
    second_keys = _objects(s3, bucket, f"spark-test-{run}/derived/billing/charges/dt={DATE}/")
    assert second_keys and not set(first_keys) & set(second_keys), "a rerun must replace the date's objects"
    invoices = _objects(s3, bucket, f"spark-test-{run}/derived/billing/invoices/dt={DATE}/")
    assert len(invoices) == len({account for account, _ in expected})
