"""The billing, analytics and report jobs on a generated usage log in a local directory, through Spark in
local mode; every figure compared with the plain-Python computation in tests/support/usage_reference.py.

One session for all (see tests/support/spark_session.py) and one generated log per module: Spark tests cost
seconds each, so there are few of them and each checks a lot.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from ferrymq.spark.io import Io
from ferrymq.spark.pipeline import ANALYTICS_TABLES, run_billing, run_jobs
from ferrymq.spark.prices import Prices
from ferrymq.spark.timing import Stages
from tests.support import usage_reference as reference
from tests.support.usage_log import ABUSIVE_KEY, THROTTLED_ACCOUNT, UsageLog, generate

DATE, EARLIER = "2026-11-21", "2026-11-20"
# Small tiers and free allowances, so that a few thousand records cross every boundary.
PRICES = {
    "currency": "USD",
    "free_requests_per_month": 400,
    "requests": {"standard": [{"up_to": 1500, "per_million": 400000.0}, {"up_to": None, "per_million": 300000.0}],
                 "fifo": [{"up_to": 1000, "per_million": 500000.0}, {"up_to": None, "per_million": 350000.0}]},
    "transfer_out": {"free_gb_per_month": 0.01, "tiers": [{"up_to": 0.05, "per_gb": 90.0},
                                                            {"up_to": None, "per_gb": 50.0}]},
    "kms": {"free_requests_per_month": 20, "per_10k": 300.0},
}


def _write(log: UsageLog, root: Path) -> None:
    for key, body in log.bodies().items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)


def _table(root: Path) -> list[dict[str, Any]]:
    files = sorted(root.rglob("*.parquet"))
    return [row for f in files for row in pq.read_table(f).to_pylist()]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("usage-jobs")
    log, late = generate((EARLIER, DATE), late_hour=(DATE, 5))
    _write(log, root / "usage" / "v1")
    prices_file = root / "prices.json"
    prices_file.write_text(json.dumps(PRICES))
    return {"root": root, "input": str(root / "usage" / "v1"), "output": str(root / "derived"), "log": log,
            "late": late, "prices": Prices.load(prices_file)}


def _check_billing(out: Path, lines: list[tuple[str, str]], prices: Prices) -> None:
    records, _ = reference.parse(lines)
    expected = reference.charges(records, DATE, prices)
    got = {(r["account"], r["item"]): r for r in _table(out / "billing" / "charges" / f"dt={DATE}")}
    assert set(got) == set(expected)
    for key, want in expected.items():
        row = got[key]
        assert (row["quantity_day"], row["quantity_mtd"]) == (want["quantity_day"], want["quantity_mtd"]), key
        assert row["amount_day"] == pytest.approx(want["amount_day"], rel=1e-9, abs=1e-9), key
        assert row["amount_mtd"] == pytest.approx(want["amount_mtd"], rel=1e-9, abs=1e-9), key
    usage = {(r["account"], r["queue_type"], r["action_class"]):
             (r["requests"], r["billable_units"], r["bytes_in"], r["bytes_out"], r["kms_calls"])
             for r in _table(out / "billing" / "usage" / f"dt={DATE}")}
    assert usage == reference.usage_lines(records, DATE)
    invoices = sorted((out / "billing" / "invoices" / f"dt={DATE}").iterdir())
    assert [p.stem for p in invoices] == sorted({account for account, _ in expected})
    for path in invoices:
        rows = list(csv.DictReader(io.StringIO(path.read_text())))
        items = {r["item"]: r for r in rows}
        day_total = sum(v["amount_day"] for (a, _), v in expected.items() if a == path.stem)
        assert float(items["total"]["amount_day"]) == pytest.approx(day_total, abs=2e-6)
        assert int(items["requests_standard"]["quantity_day"]) == expected[(path.stem, "requests_standard")][
            "quantity_day"]


def test_billing_matches_the_reference_and_a_rerun_picks_up_a_late_hour(spark: Any, workspace: dict) -> None:
    out = Path(workspace["output"])

    # Spark's own writes on the first run (tables larger than the driver takes), the driver's on the rerun.
    first = run_billing(Io(spark, driver_rows=0), workspace["input"], workspace["output"], DATE, workspace["prices"])

    lines = workspace["log"].all_lines()
    _check_billing(out, lines, workspace["prices"])
    malformed = len(reference.parse(workspace["log"].all_lines(DATE))[1])
    assert first["quarantined"] == malformed > 0
    assert len(_table(out / "quarantine" / f"dt={DATE}")) == malformed
    # Given the late hour arrives a day later, when the date is billed again:
    _write(workspace["late"], Path(workspace["input"]))

    again = run_billing(Io(spark), workspace["input"], workspace["output"], DATE, workspace["prices"])

    # then the late records are billed, and nothing of the first run is left beside the second's output.
    _check_billing(out, lines + workspace["late"].all_lines(), workspace["prices"])
    assert again["records"] == first["records"] + len(workspace["late"].all_lines())
    assert first["records"] == len(reference.parse(workspace["log"].all_lines(DATE))[0])
    assert len(_table(out / "quarantine" / f"dt={DATE}")) == malformed


def test_all_three_jobs_in_one_session_match_the_reference_and_time_each_stage(spark: Any, workspace: dict) -> None:
    _write(workspace["late"], Path(workspace["input"]))
    records, bad = reference.parse(workspace["log"].all_lines(DATE) + workspace["late"].all_lines(DATE))
    out = Path(workspace["output"]) / "analytics"
    printed = io.StringIO()

    # Analytics takes the date's records from billing's read of the month; the report reads what both wrote.
    billed, summary, report = run_jobs(Io(spark), ["billing", "analytics", "report"], workspace["input"],
                                       workspace["output"], DATE, workspace["prices"], Stages(printed))

    assert (summary["records"], summary["quarantined"]) == (len(records), len(bad))
    assert (billed["records"], billed["quarantined"]) == (len(records), len(bad))
    _check_billing(Path(workspace["output"]), workspace["log"].all_lines() + workspace["late"].all_lines(),
                   workspace["prices"])
    stages = printed.getvalue().splitlines()
    assert [line.split()[2] for line in stages] == ["read", "parse", *(
        ["billing/usage", "billing/charges", "billing/invoices", "billing/count"]
        + [f"analytics/{name}" for name in ANALYTICS_TABLES] + ["analytics/count", "report/read", "report/render"])]
    assert all(re.fullmatch(r"ferrymq spark: \S+ \d+\.\d\d s", line) for line in stages), stages
    assert set(report["seconds"]) == {"report/read", "report/render"}
    assert {"read", "billing/charges"} <= set(billed["seconds"]) and "analytics/count" not in billed["seconds"]
    hourly = {(r["queue_arn"], r["hour"]): r for r in _table(out / "queue_hourly" / f"dt={DATE}")}
    expected = reference.queue_hourly(records)
    assert set(hourly) == set(expected)
    for key, want in expected.items():
        for name in ("requests", "messages_sent", "messages_received", "messages_deleted", "empty_receives",
                     "errors"):
            assert hourly[key][name] == want.get(name, 0), (key, name)
    errors = {(r["queue_arn"], r["hour"], r["outcome"]): r["count"] for r in _table(out / "errors_by_code" /
                                                                                   f"dt={DATE}")}
    assert errors == reference.errors_by_code(records)
    latency = {(r["queue_arn"], r["hour"], r["action"]): (r["p50"], r["p95"], r["p99"])
               for r in _table(out / "latency" / f"dt={DATE}")}
    expected_latency = reference.latency(records)
    assert set(latency) == set(expected_latency)
    for key, want in expected_latency.items():
        assert latency[key] == pytest.approx(want, rel=1e-9), key
    top_accounts = [(r["account"], r["requests"]) for r in sorted(_table(out / "top_accounts" / f"dt={DATE}"),
                                                                  key=lambda r: r["rank"])]
    assert top_accounts == reference.top(records, "account")
    top_queues = [(r["queue_arn"], r["requests"]) for r in sorted(_table(out / "top_queues" / f"dt={DATE}"),
                                                                  key=lambda r: r["rank"])]
    assert top_queues == reference.top(records, "queue_arn")
    flagged = {(r["client"], r["hour"]): (r["throttled"], r["error_rate_outlier"], r["request_rate_outlier"])
               for r in _table(out / "outliers" / f"dt={DATE}")}
    assert flagged == reference.outliers(records)
    assert (f"key:{ABUSIVE_KEY}", f"{DATE}T03") in flagged
    assert flagged[(THROTTLED_ACCOUNT, f"{DATE}T10")][0]

    page = Path(report["report"]).read_text()
    assert page.count("<svg") == 4
    assert "111111111111" in page and "InvalidClientTokenId" in page
