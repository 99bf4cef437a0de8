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

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from datetime import date as Date
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ferrymq.spark import report
from ferrymq.spark.io import Io
from ferrymq.spark.prices import Prices
from ferrymq.spark.storage import Location
from ferrymq.spark.timing import Stages
from ferrymq.spark.transforms import analytics, billing, records

JOBS = ("billing", "analytics", "report")
READ_STAGES = ("read", "parse")
"""Stages billing and analytics share when run together: fetching the objects, then checking their lines and
writing the quarantine (where the parse, lazy until then, runs)."""
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


@dataclass
class Usage:
    """What the jobs of one run read: the records of ``dates`` (derived columns, cached) and the quarantine."""

    records: DataFrame
    quarantine: DataFrame
    dates: list[str]


def read_usage(io: Io, input_url: str, dates: list[str]) -> Usage:
    # Cached once checked: records and quarantine both come from it, the objects are fetched once, and the
    # cache holds parsed columns (plus the text of malformed lines only), not every line's text.
    checked = records.check(io.read_lines([_day_url(input_url, d) for d in dates])).cache()
    parsed, quarantine = records.split(checked)
    # Delivery is at least once (a Firehose retry, a spooled body re-sent after its delete was lost): a request
    # id is unique to one answered request, so keeping one record per id bills every request exactly once.
    return Usage(records.with_derived(parsed.dropDuplicates(["request_id"])).cache(), quarantine, dates)


def _write_quarantine(io: Io, quarantine: DataFrame, output: str, date: str) -> int:
    today = quarantine.where(F.col("date") == date)
    written = io.write_table(today, _day_url(_table_url(output, "quarantine"), date))
    return written.num_rows if written is not None else today.count()


def run_jobs(io: Io, jobs: list[str], input_url: str, output: str, date: str, prices: Prices | None = None,
             stages: Stages | None = None) -> list[dict[str, Any]]:
    """Run ``jobs`` (of ``JOBS``, in that order) for ``date`` in one session, reading the usage once: billing's
    month when billing runs (analytics takes the date's records from it), else the date's.  One summary per job.
    """
    unknown = set(jobs) - set(JOBS)
    if unknown:
        raise ValueError(f"unknown jobs {sorted(unknown)}: choose from {', '.join(JOBS)}")
    date = check_date(date)
    stages = stages or Stages()
    summaries = []
    if "billing" in jobs or "analytics" in jobs:
        try:
            with stages.stage(READ_STAGES[0]):
                usage = read_usage(io, input_url, month_dates(date) if "billing" in jobs else [date])
            with stages.stage(READ_STAGES[1]):
                quarantined = _write_quarantine(io, usage.quarantine, output, date)
            if "billing" in jobs:
                if prices is None:
                    raise ValueError("billing needs a price table")
                summaries.append(_billing(io, usage, output, date, prices, quarantined, stages))
            if "analytics" in jobs:
                summaries.append(_analytics(io, usage, output, date, quarantined, stages))
        finally:
            # A rerun in the same session must read the objects again (a cached read of the same paths would
            # hide records that arrived since).
            io.session.catalog.clearCache()
    if "report" in jobs:
        summaries.append(run_report(io, output, date, stages))
    for summary in summaries:
        summary["seconds"] = stages.of(summary["job"], *(() if summary["job"] == "report" else READ_STAGES))
    return summaries


def run_billing(io: Io, input_url: str, output: str, date: str, prices: Prices) -> dict[str, Any]:
    return run_jobs(io, ["billing"], input_url, output, date, prices)[0]


def run_analytics(io: Io, input_url: str, output: str, date: str) -> dict[str, Any]:
    return run_jobs(io, ["analytics"], input_url, output, date)[0]


def _billing(io: Io, usage: Usage, output: str, date: str, prices: Prices, quarantined: int,
             stages: Stages) -> dict[str, Any]:
    month = usage.records
    with stages.stage("billing/usage"):
        io.write_table(billing.usage_lines(month, date), _day_url(_table_url(output, "billing", "usage"), date))
    with stages.stage("billing/charges"):
        charges = billing.charges(month, date, prices)
        written = io.write_table(charges, _day_url(_table_url(output, "billing", "charges"), date))
        rows = written.to_pylist() if written is not None else [r.asDict() for r in charges.collect()]
    with stages.stage("billing/invoices"):
        by_account: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_account.setdefault(row["account"], []).append(row)
        invoices = Location.parse(_day_url(_table_url(output, "billing", "invoices"), date))
        written_keys = set()
        for account, account_rows in sorted(by_account.items()):
            key = invoices.child(f"{account}.csv").key
            io.store.write(invoices, key, billing.invoice_csv(account, date, account_rows).encode(), "text/csv")
            written_keys.add(key)
        io.store.replace_prefix(invoices, written_keys)
    with stages.stage("billing/count"):
        counted = month.where(F.col("date") == date).count()
    return {"job": "billing", "date": date, "records": counted, "quarantined": quarantined,
            "accounts": len(by_account), "invoices": invoices.url}


def analytics_tables(day: DataFrame) -> dict[str, DataFrame]:
    day = analytics.with_queue_bucket(day)
    return {
        "queue_hourly": analytics.queue_hourly(day),
        "errors_by_code": analytics.errors_by_code(day),
        "latency": analytics.latency(day),
        "top_accounts": analytics.top(day, "account"),
        "top_queues": analytics.top(day, "queue_arn"),
        "outliers": analytics.outliers(day),
    }


def _analytics(io: Io, usage: Usage, output: str, date: str, quarantined: int, stages: Stages) -> dict[str, Any]:
    day = usage.records if usage.dates == [date] else usage.records.where(F.col("date") == date)
    for name, table in analytics_tables(day).items():
        with stages.stage(f"analytics/{name}"):
            io.write_table(table, _day_url(_table_url(output, "analytics", name), date))
    with stages.stage("analytics/count"):
        counts = day.agg(F.count(F.lit(1)).alias("records"),
                         F.sum(analytics.unparseable_queue().cast("long")).alias("unparseable")).first()
    return {"job": "analytics", "date": date, "records": counts["records"], "quarantined": quarantined,
            "unparseable_queue_records": counts["unparseable"] or 0, "output": _table_url(output, "analytics")}


def run_report(io: Io, output: str, date: str, stages: Stages | None = None) -> dict[str, Any]:
    """Renders the date's analytics and charges (run those jobs first) as one HTML page next to them.

    The tables are read by the driver (a few hundred rows): the report needs no Spark job.
    """
    date = check_date(date)
    stages = stages or Stages()
    with stages.stage("report/read"):
        tables = {name: io.read_rows(_day_url(_table_url(output, "analytics", name), date))
                  for name in ANALYTICS_TABLES}
        tables["charges"] = io.read_rows(_day_url(_table_url(output, "billing", "charges"), date))
    with stages.stage("report/render"):
        page = report.render(date, tables)
        path = io.write_object(_table_url(output, "reports", f"dt={date}", "report.html"), page.encode(),
                               "text/html; charset=utf-8")
    return {"job": "report", "date": date, "report": path, "seconds": stages.of("report")}
