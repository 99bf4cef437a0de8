"""Analytics on days too small or too odd for the generated log: a lone busy client, a malformed queue URL.

Built from records in memory (the records' path from text is covered by test_jobs.py); one shared session.
"""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

from ferrymq.spark.pipeline import analytics_tables
from ferrymq.spark.transforms import analytics, records
from tests.support.usage_log import _record

DATE = "2026-11-21"
BUSY, QUIET = "111111111111", "222222222222"
MALFORMED = "arn:aws:sqs:us-east-1:111111111111:not a url"


def _frame(spark: Any, rows: list[dict[str, Any]]) -> Any:
    names = records.RECORD_SCHEMA.fieldNames()
    return records.with_derived(spark.createDataFrame([tuple(r[n] for n in names) for r in rows],
                                                      records.RECORD_SCHEMA))


def _hour(rng: random.Random, hour: int, counts: dict[str, int], arn: str | None = None) -> list[dict[str, Any]]:
    start = datetime.fromisoformat(f"{DATE}T{hour:02d}:00:00+00:00").timestamp()
    return [_record(rng, start + rng.uniform(0, 3599), account, arn or f"arn:aws:sqs:us-east-1:{account}:orders",
                    "none", "SendMessage")
            for account, n in counts.items() for _ in range(n)]


def test_a_request_rate_outlier_needs_a_population_and_a_malformed_queue_url_is_no_queue(spark: Any) -> None:
    rng = random.Random(3)
    few = {BUSY: 300, QUIET: 1, "999999999999": 1}
    crowd = {BUSY: 300, **{f"{n}00000000000"[:12]: 2 for n in range(3, 3 + analytics.MIN_CLIENTS - 1)}}
    rows = _hour(rng, 1, few) + _hour(rng, 2, crowd) + _hour(rng, 3, {QUIET: 3}, MALFORMED)

    day = _frame(spark, rows).cache()
    try:
        tables = {name: [r.asDict() for r in t.collect()] for name, t in analytics_tables(day).items()}
    finally:
        day.unpersist()

    # A lone busy account among fewer than MIN_CLIENTS is not an outlier; the same among enough clients is.
    flagged = {(r["client"], r["hour"]) for r in tables["outliers"] if r["request_rate_outlier"]}
    assert flagged == {(BUSY, f"{DATE}T02")}
    # A queue URL that names no queue counts towards one explicit bucket, never as a queue named after it.
    queues = {r["queue_arn"]: r["requests"] for r in tables["top_queues"]}
    assert queues[analytics.UNPARSEABLE_QUEUE] == 3
    for name in ("top_queues", "queue_hourly", "latency"):
        assert not [r for r in tables[name] if "not a url" in (r["queue_arn"] or "")], name
