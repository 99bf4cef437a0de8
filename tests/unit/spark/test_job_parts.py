"""The jobs' plain-Python parts: locations, dates, the price table, invoices, the data source's type mapping."""

from __future__ import annotations

from datetime import date

import pytest

from ferrymq.spark.pipeline import check_date, month_dates
from ferrymq.spark.prices import GB, Prices
from ferrymq.spark.storage import Location
from ferrymq.spark.transforms.billing import invoice_csv


def test_locations_of_s3_and_local_urls() -> None:
    s3 = Location.parse("s3a://bucket/usage/v1/")
    assert (s3.scheme, s3.bucket, s3.key) == ("s3", "bucket", "usage/v1")
    assert s3.child("dt=2026-11-21").url == "s3://bucket/usage/v1/dt=2026-11-21"
    local = Location.parse("file:///tmp/x/")
    assert (local.scheme, local.key, local.child("a", "b.csv").url) == ("file", "/tmp/x", "/tmp/x/a/b.csv")


def test_dates_named_for_schedules_resolve_when_the_job_runs() -> None:
    today = date(2026, 3, 1)
    assert check_date("yesterday", today) == "2026-02-28"
    assert check_date("today", today) == "2026-03-01"
    assert check_date("2026-11-21", today) == "2026-11-21"
    with pytest.raises(ValueError):
        check_date("21/11/2026", today)


def test_the_month_to_date_of_a_day() -> None:
    assert month_dates("2026-02-03") == ["2026-02-01", "2026-02-02", "2026-02-03"]


def test_default_prices_are_sqs_public_prices() -> None:
    prices = Prices.load()
    assert prices.free_requests == 1_000_000
    assert prices.requests["standard"][0].price * 1e6 == pytest.approx(0.40)
    assert prices.requests["fifo"][0].price * 1e6 == pytest.approx(0.50)
    assert prices.transfer_free_bytes == 100 * GB
    assert prices.kms_per_call * 10_000 == pytest.approx(0.03)


def test_an_invoice_lists_items_in_order_with_a_total() -> None:
    rows = [
        {"item": "kms", "quantity_day": 3, "amount_day": 0.5, "quantity_mtd": 9, "amount_mtd": 1.25,
         "currency": "USD"},
        {"item": "requests_standard", "quantity_day": 10, "amount_day": 1.0, "quantity_mtd": 20, "amount_mtd": 2.0,
         "currency": "USD"},
    ]

    text = invoice_csv("111122223333", "2026-11-21", rows)

    lines = text.splitlines()
    assert [line.split(",")[3] for line in lines[1:]] == ["requests_standard", "kms", "total"]
    assert lines[-1] == "111122223333,2026-11-21,2026-11,total,,1.500000,,3.250000,USD"


def test_the_data_source_maps_the_column_types_the_jobs_write() -> None:
    import pyarrow as pa
    from pyspark.sql.types import DecimalType, DoubleType, LongType, StringType, StructField, StructType

    from ferrymq.spark.datasource import arrow_schema, spark_schema

    schema = StructType([StructField("a", StringType()), StructField("b", LongType()),
                         StructField("c", DoubleType()), StructField("d", DecimalType(20, 6))])

    arrow = arrow_schema(schema)

    assert arrow.types == [pa.string(), pa.int64(), pa.float64(), pa.decimal128(20, 6)]
    assert spark_schema(arrow) == schema
