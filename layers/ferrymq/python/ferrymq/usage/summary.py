"""One day's usage, summed from the raw records in the usage bucket (FerryMQ's GetUsageSummary).

It reads the day's objects (``usage/v1/dt=YYYY-MM-DD/...``, gzipped JSON Lines, :mod:`.schema`) and adds up,
per account and per action, requests, billing units, errors, messages and payload bytes. That is meant for a
quick look at a small deployment: it reads at most ``max_objects`` objects (``Truncated`` says when there were
more), and the Spark jobs (``spark/``) remain the way to bill a large one. Records still buffered or spooled by
a front end are not there yet: a front end uploads every ``FERRYMQ_USAGE_FLUSH_SECONDS``.

Invalid lines (what the Spark jobs quarantine) are skipped and counted; a record delivered twice (Firehose
delivers at least once) is counted once, by its request id.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from botocore.exceptions import ClientError

from ferrymq.aws.errors import translate_client_errors
from ferrymq.usage import schema

MAX_OBJECTS = 2000
UNAUTHENTICATED = "unauthenticated"
"""The account shown for requests refused before their key was known."""
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class _Totals:
    requests: int = 0
    billable_units: int = 0
    errors: int = 0
    messages_in: int = 0
    messages_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    actions: dict[str, list[int]] = field(default_factory=dict)
    """Action -> [requests, errors]."""

    def add(self, record: dict[str, Any]) -> None:
        failed = record["outcome"] != schema.SUCCESS
        self.requests += 1
        self.billable_units += record["billable_units"]
        self.errors += failed
        self.messages_in += record["messages_in"]
        self.messages_out += record["messages_out"]
        self.bytes_in += record["bytes_in"]
        self.bytes_out += record["bytes_out"]
        counts = self.actions.setdefault(record["action"], [0, 0])
        counts[0] += 1
        counts[1] += failed


def summarize_records(records: Iterable[Any], account: str | None = None) -> tuple[dict[str, _Totals], int, int]:
    """Per-account totals of the valid records (only ``account``'s when given), with how many records were
    summed and how many were invalid."""
    totals: dict[str, _Totals] = {}
    seen: set[str] = set()
    summed = invalid = 0
    for record in records:
        if schema.problems(record):
            invalid += 1
            continue
        if record["request_id"] in seen:
            continue
        seen.add(record["request_id"])
        owner = record["account"] or UNAUTHENTICATED
        if account is not None and owner != account:
            continue
        totals.setdefault(owner, _Totals()).add(record)
        summed += 1
    return totals, summed, invalid


def summary(client: Any, bucket: str, dt: str, account: str | None = None, *,
            max_objects: int = MAX_OBJECTS) -> dict[str, Any]:
    """The GetUsageSummary answer for the UTC day ``dt`` (``YYYY-MM-DD``) from the usage bucket, read with the
    boto3 S3 ``client``: ``Records`` is 0 and ``Accounts`` empty when the day has no records (yet)."""
    keys = _keys(client, bucket, schema.date_prefix(dt), max_objects + 1)
    read = keys[:max_objects]
    totals, summed, invalid = summarize_records(_records(client, bucket, read), account)
    return {
        "Date": dt,
        "Records": summed,
        "InvalidRecords": invalid,
        "Objects": len(read),
        "Truncated": len(keys) > max_objects,
        "Accounts": [_account_summary(name, t) for name, t in sorted(totals.items())],
    }


def _account_summary(name: str, t: _Totals) -> dict[str, Any]:
    return {
        "AccountId": name,
        "Requests": t.requests,
        "BillableUnits": t.billable_units,
        "Errors": t.errors,
        "MessagesIn": t.messages_in,
        "MessagesOut": t.messages_out,
        "BytesIn": t.bytes_in,
        "BytesOut": t.bytes_out,
        "Actions": [{"Action": action, "Requests": n, "Errors": e} for action, (n, e) in sorted(t.actions.items())],
    }


def _keys(client: Any, bucket: str, prefix: str, limit: int) -> list[str]:
    keys: list[str] = []
    try:
        with translate_client_errors():
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                keys.extend(item["Key"] for item in page.get("Contents", []))
                if len(keys) >= limit:
                    return keys[:limit]
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "NoSuchBucket":
            return []  # nothing was ever uploaded
        raise
    return keys


def _records(client: Any, bucket: str, keys: list[str]) -> Iterator[Any]:
    for key in keys:
        with translate_client_errors():
            body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        if body.startswith(_GZIP_MAGIC):
            body = gzip.decompress(body)
        for line in body.splitlines():
            if not line.strip():
                continue
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError:
                yield None  # counted as invalid
