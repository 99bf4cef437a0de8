"""What each job does, given its I/O: read a date's usage, run the transforms, write the outputs.

Layout under the job's ``--output`` (every table is one date's partition, replaced whole by a rerun)::

    quarantine/dt=D/                       malformed lines: source, date, value, reason  (Parquet)
    billing/usage/dt=D/                    per account, queue type, action class          (Parquet)
    billing/charges/dt=D/                  per account and item, day and month to date    (Parquet)
    billing/invoices/dt=D/<account>.csv    one invoice per account
    analytics/<table>/dt=D/                queue_hourly, errors_by_code, latency, top_accounts, top_queues,
                                           outliers                                       (Parquet)
    reports/dt=D/report.html               the report

``--input`` is the usage prefix (``s3://bucket/usage/v1``); a date's records are under ``dt=D/``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from datetime import date as Date
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ferrymq.spark import report
from ferrymq.spark.io import Io
from ferrymq.spark.prices import Prices
from ferrymq.spark.storage import Location
from ferrymq.spark.transforms import analytics, billing, records

ANALYTICS_TABLES = ("queue_hourly", "errors_by_code", "latency", "top_accounts", "top_queues", "outliers")


def check_date(text: str, today: Date | None = None) -> str:
    """``text`` as a YYYY-MM-DD date (what every partition is named by); ``today`` and ``yesterday`` (UTC) are
    resolved when the job runs, for schedules that cannot compute a date."""
    today = today or datetime.now(UTC).date()
    named = {"today": today, "yesterday": today - timedelta(days=1)}
    return (named[text] if text in named else Date.fromisoformat(text)).isoformat()


def _day_url(base: str, date: str) -> str:
    return f"{base.rstrip('/')}/dt={date}"


def _table_url(output: str, *parts: str) -> str:
    return "/".join([output.rstrip("/"), *parts])


def month_dates(date: str) -> list[str]:
    """The dates of ``date``'s month up to and including it."""
    end = Date.fromisoformat(date)
    return [(end.replace(day=1) + timedelta(days=i)).isoformat() for i in range(end.day)]


def _read(io: Io, input_url: str, dates: list[str]) -> tuple[DataFrame, DataFrame]:
    # Cached once checked: records and quarantine both come from it, the objects are fetched once, and the
    # cache holds parsed columns (plus the text of malformed lines only), not every line's text.
    checked = records.check(io.read_lines([_day_url(input_url, d) for d in dates])).cache()
    parsed, quarantine = records.split(checked)
    # Delivery is at least once (a Firehose retry, a spooled body re-sent after its delete was lost): a request
    # id is unique to one answered request, so keeping one record per id bills every request exactly once.
    return records.with_derived(parsed.dropDuplicates(["request_id"])), quarantine


def _write_quarantine(io: Io, quarantine: DataFrame, output: str, date: str) -> int:
    today = quarantine.where(F.col("date") == date).cache()
    count = today.count()
    io.write_table(today, _day_url(_table_url(output, "quarantine"), date))
    today.unpersist()
    return count


def _uncached(job: Any) -> Any:
    """Drop the job's cached frames when it ends: a rerun in the same session must read the objects again (a
    cached read of the same paths would hide records that arrived since)."""

    def run(io: Io, *args: Any) -> dict[str, Any]:
        try:
            return job(io, *args)
        finally:
            io.spark.catalog.clearCache()

    run.__doc__ = job.__doc__
    return run


@_uncached
def run_billing(io: Io, input_url: str, output: str, date: str, prices: Prices) -> dict[str, Any]:
    date = check_date(date)
    month, quarantine = _read(io, input_url, month_dates(date))
    month = month.cache()
    quarantined = _write_quarantine(io, quarantine, output, date)
    io.write_table(billing.usage_lines(month, date), _day_url(_table_url(output, "billing", "usage"), date))
    charges = billing.charges(month, date, prices).cache()
    io.write_table(charges, _day_url(_table_url(output, "billing", "charges"), date))
    by_account: dict[str, list[dict[str, Any]]] = {}
    for row in charges.collect():
        by_account.setdefault(row["account"], []).append(row.asDict())
    invoices = Location.parse(_day_url(_table_url(output, "billing", "invoices"), date))
    written = set()
    for account, rows in sorted(by_account.items()):
        key = invoices.child(f"{account}.csv").key
        io.store.write(invoices, key, billing.invoice_csv(account, date, rows).encode(), "text/csv")
        written.add(key)
    io.store.replace_prefix(invoices, written)
    summary = {
        "job": "billing", "date": date, "records": month.where(F.col("date") == date).count(),
        "quarantined": quarantined, "accounts": len(by_account), "invoices": invoices.url,
    }
    return summary


def analytics_tables(day: DataFrame) -> dict[str, DataFrame]:
    return {
        "queue_hourly": analytics.queue_hourly(day),
        "errors_by_code": analytics.errors_by_code(day),
        "latency": analytics.latency(day),
        "top_accounts": analytics.top(day, "account"),
        "top_queues": analytics.top(day, "queue_arn"),
        "outliers": analytics.outliers(day),
    }


@_uncached
def run_analytics(io: Io, input_url: str, output: str, date: str) -> dict[str, Any]:
    date = check_date(date)
    day, quarantine = _read(io, input_url, [date])
    day = day.cache()
    quarantined = _write_quarantine(io, quarantine, output, date)
    for name, table in analytics_tables(day).items():
        io.write_table(table, _day_url(_table_url(output, "analytics", name), date))
    summary = {"job": "analytics", "date": date, "records": day.count(), "quarantined": quarantined,
               "output": _table_url(output, "analytics")}
    return summary


def _rows(io: Io, url: str) -> list[dict[str, Any]]:
    if not io.exists(url):
        return []
    return [row.asDict() for row in io.read_table(url).collect()]


def run_report(io: Io, output: str, date: str) -> dict[str, Any]:
    """Renders the date's analytics and charges (run those jobs first) as one HTML page next to them."""
    date = check_date(date)
    tables = {name: _rows(io, _day_url(_table_url(output, "analytics", name), date)) for name in ANALYTICS_TABLES}
    tables["charges"] = _rows(io, _day_url(_table_url(output, "billing", "charges"), date))
    page = report.render(date, tables)
    path = io.write_object(_table_url(output, "reports", f"dt={date}", "report.html"), page.encode(),
                           "text/html; charset=utf-8")
    return {"job": "report", "date": date, "report": path}
