"""GetUsageSummary's reading of the usage bucket, on the stand-in's S3: a realistic day of records (several
accounts, errors, an abusive client, malformed lines, lines delivered twice) summed per account and action."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import pytest

from ferrymq.aws import session
from ferrymq.settings import Settings
from ferrymq.usage import schema, summary
from tests.support.usage_log import generate

DAY = "2026-11-21"


@pytest.fixture(scope="module")
def bucket(aws_settings: Settings) -> tuple[Any, str, list[dict]]:
    """A bucket of its own holding one generated day, and the day's lines as decoded JSON (None: not JSON)."""
    s3 = session.client("s3", aws_settings)
    name = f"usage-summary-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    log, _ = generate((DAY,), per_hour=4)
    for key, body in log.bodies().items():
        s3.put_object(Bucket=name, Key=schema.PREFIX + key, Body=body, ContentEncoding="gzip")
    decoded = []
    for _, line in log.all_lines(DAY):
        try:
            decoded.append(json.loads(line))
        except ValueError:
            decoded.append(None)
    return s3, name, decoded


def test_a_day_is_summed_per_account_once_per_request(bucket: tuple[Any, str, list[dict]]) -> None:
    s3, name, lines = bucket
    valid = [r for r in lines if not schema.problems(r)]
    unique = list({r["request_id"]: r for r in valid}.values())
    assert len(unique) < len(valid), "the generated day should hold lines delivered twice"
    # when the day is summarised
    answer = summary.summary(s3, name, DAY)
    # then every valid record counts once, under its account, and the invalid lines are counted apart
    assert (answer["Date"], answer["Records"], answer["Truncated"]) == (DAY, len(unique), False)
    assert answer["InvalidRecords"] == len(lines) - len(valid)
    requests = Counter(r["account"] or summary.UNAUTHENTICATED for r in unique)
    assert {a["AccountId"]: a["Requests"] for a in answer["Accounts"]} == dict(requests)
    errors = Counter(r["account"] or summary.UNAUTHENTICATED for r in unique if r["outcome"] != schema.SUCCESS)
    assert {a["AccountId"]: a["Errors"] for a in answer["Accounts"] if a["Errors"]} == dict(errors)
    units = Counter()
    for r in unique:
        units[r["account"] or summary.UNAUTHENTICATED] += r["billable_units"]
    assert {a["AccountId"]: a["BillableUnits"] for a in answer["Accounts"]} == dict(units)
    # and per action, adding up to the account's requests
    for account in answer["Accounts"]:
        assert sum(a["Requests"] for a in account["Actions"]) == account["Requests"]


def test_one_account_a_day_without_records_and_a_cut_short_read(bucket: tuple[Any, str, list[dict]]) -> None:
    s3, name, _ = bucket
    whole = {a["AccountId"]: a for a in summary.summary(s3, name, DAY)["Accounts"]}
    one = summary.summary(s3, name, DAY, "111111111111")
    assert [a["AccountId"] for a in one["Accounts"]] == ["111111111111"]
    assert one["Accounts"][0] == whole["111111111111"]
    empty = summary.summary(s3, name, "2001-01-01")
    assert (empty["Records"], empty["Objects"], empty["Accounts"]) == (0, 0, [])
    short = summary.summary(s3, name, DAY, max_objects=2)
    assert (short["Objects"], short["Truncated"]) == (2, True)


def test_a_bucket_that_does_not_exist_holds_no_records(aws_settings: Settings) -> None:
    s3 = session.client("s3", aws_settings)
    assert summary.summary(s3, f"no-such-bucket-{uuid.uuid4().hex[:8]}", DAY)["Records"] == 0
