"""The jobs' figures computed again in plain Python, record by record, for the Spark tests to compare with.

Written from the rules (ferrymq.usage.schema, the price table's meaning), not from the Spark code: loops and
dicts, exact percentiles by sorting, tiers walked one at a time.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from typing import Any

from ferrymq.errors import OverLimit, RequestThrottled, Throttling
from ferrymq.spark.prices import Prices
from ferrymq.usage import schema

_DT = re.compile(r"dt=(\d{4}-\d{2}-\d{2})")


def parse(lines: list[tuple[str, str]]) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """(valid records, one per request id, and quarantined (source, line)) by schema.problems and the object's
    dt= partition."""
    good, bad = [], []
    seen: set[str] = set()
    for source, line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            bad.append((source, line))
            continue
        match = _DT.search(source)
        if schema.problems(record) or (match and record["ts"][:10] != match.group(1)):
            bad.append((source, line))
        elif record["request_id"] not in seen:
            seen.add(record["request_id"])
            good.append(record)
    return good, bad


def _price(total: float, free: float, tiers: Any) -> float:
    """Walk the tiers: units free..total of the month, each tier over its slice of the running total."""
    amount, lower = 0.0, 0.0
    for tier in tiers:
        upper = math.inf if tier.up_to is None else tier.up_to
        slice_start, slice_end = max(lower, free), min(total, upper)
        if slice_end > slice_start:
            amount += (slice_end - slice_start) * tier.price
        lower = upper
    return amount


def _month_amounts(std: float, fifo: float, out: float, kms: float, prices: Prices) -> dict[str, float]:
    free_std = min(std, prices.free_requests)
    free_fifo = min(fifo, prices.free_requests - free_std)
    return {
        "requests_standard": _price(std, free_std, prices.requests["standard"]),
        "requests_fifo": _price(fifo, free_fifo, prices.requests["fifo"]),
        "transfer_out": _price(out, min(out, prices.transfer_free_bytes), prices.transfer),
        "kms": max(0.0, kms - prices.kms_free) * prices.kms_per_call,
    }


def charges(records: list[dict[str, Any]], date: str, prices: Prices) -> dict[tuple[str, str], dict[str, Any]]:
    """(account, item) -> quantities and amounts of the day and of the month to date."""
    month = date[:7]
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in records:
        day = r["ts"][:10]
        if r["account"] is None or day[:7] != month or day > date:
            continue
        kind = "fifo" if r["queue_type"] == "fifo" else "std"
        for suffix, include in (("mtd", True), ("day", day == date)):
            if include:
                t = totals[r["account"]]
                t[f"{kind}_{suffix}"] += r["billable_units"]
                t[f"out_{suffix}"] += r["bytes_out"]
                t[f"kms_{suffix}"] += r["kms_calls"]
                t[f"requests_{suffix}"] += 1
    result = {}
    names = {"requests_standard": "std", "requests_fifo": "fifo", "transfer_out": "out", "kms": "kms"}
    for account, t in totals.items():
        if not t["requests_day"]:
            continue
        now = _month_amounts(t["std_mtd"], t["fifo_mtd"], t["out_mtd"], t["kms_mtd"], prices)
        before = _month_amounts(t["std_mtd"] - t["std_day"], t["fifo_mtd"] - t["fifo_day"],
                                t["out_mtd"] - t["out_day"], t["kms_mtd"] - t["kms_day"], prices)
        for item, short in names.items():
            result[(account, item)] = {"quantity_day": int(t[f"{short}_day"]), "quantity_mtd": int(t[f"{short}_mtd"]),
                                       "amount_day": now[item] - before[item], "amount_mtd": now[item]}
    return result


def usage_lines(records: list[dict[str, Any]], date: str) -> dict[tuple, tuple[int, int, int, int, int]]:
    out: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    for r in records:
        if r["ts"][:10] != date or r["account"] is None:
            continue
        key = (r["account"], r["queue_type"] or "standard", schema.action_class(r["action"]))
        line = out[key]
        for i, value in enumerate((1, r["billable_units"], r["bytes_in"], r["bytes_out"], r["kms_calls"])):
            line[i] += value
    return {k: tuple(v) for k, v in out.items()}  # type: ignore[misc]


def queue_hourly(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, int]]:
    out: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in records:
        if r["queue_arn"] is None:
            continue
        c = out[(r["queue_arn"], r["ts"][:13])]
        c["requests"] += 1
        ok = r["outcome"] == schema.SUCCESS
        kind = schema.action_class(r["action"])
        if not ok:
            c["errors"] += 1
        elif kind == "send":
            c["messages_sent"] += r["messages_in"] - r["entries_failed"]
        elif kind == "delete":
            c["messages_deleted"] += r["messages_in"] - r["entries_failed"]
        elif r["action"] == "ReceiveMessage":
            c["messages_received"] += r["messages_out"]
            c["empty_receives"] += r["messages_out"] == 0
    return {k: dict(v) for k, v in out.items()}


def errors_by_code(records: list[dict[str, Any]]) -> dict[tuple, int]:
    return dict(Counter((r["queue_arn"], r["ts"][:13], r["outcome"]) for r in records
                        if r["outcome"] != schema.SUCCESS))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    rank = p * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency(records: list[dict[str, Any]]) -> dict[tuple, tuple[float, float, float]]:
    groups: dict[tuple, list[float]] = defaultdict(list)
    for r in records:
        if r["queue_arn"] is not None:
            groups[(r["queue_arn"], r["ts"][:13], r["action"])].append(r["latency_ms"])
    return {k: (percentile(v, 0.5), percentile(v, 0.95), percentile(v, 0.99)) for k, v in groups.items()}


def top(records: list[dict[str, Any]], column: str, n: int = 10) -> list[tuple[str, int]]:
    counts = Counter(r[column] for r in records if r[column] is not None)
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def outliers(records: list[dict[str, Any]], min_requests: int = 20, error_rate: float = 0.5,
             rate_factor: float = 10.0, min_clients: int = 5) -> dict[tuple[str, str], tuple[bool, bool, bool]]:
    throttle = {e.query_code for e in (Throttling, RequestThrottled, OverLimit)}
    per: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for r in records:
        client = r["account"] or (f"key:{r['access_key_id']}" if r["access_key_id"] else "anonymous")
        c = per[(client, r["ts"][:13])]
        c["requests"] += 1
        c["errors"] += r["outcome"] != schema.SUCCESS
        c["throttled"] += r["outcome"] in throttle
    by_hour: dict[str, list[int]] = defaultdict(list)
    for (_, hour), c in per.items():
        by_hour[hour].append(c["requests"])
    flagged = {}
    for (client, hour), c in per.items():
        median = percentile([float(v) for v in by_hour[hour]], 0.5)
        flags = (c["throttled"] > 0,
                 c["requests"] >= min_requests and c["errors"] / c["requests"] >= error_rate,
                 c["requests"] >= min_requests and len(by_hour[hour]) >= min_clients
                 and c["requests"] > median * rate_factor)
        if any(flags):
            flagged[(client, hour)] = flags
    return flagged
