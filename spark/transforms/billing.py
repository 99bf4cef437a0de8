"""Billing: records of a month up to a date -> the date's usage lines and charges, per account.

SQS bills request units (one per started 64 KiB of payload, see :mod:`ferrymq.usage.schema`) by queue type,
data transferred out, and KMS calls; only authenticated requests (with an account) are billed, and requests
that name no queue are billed as standard.  Prices are tiered on the month's running totals, so a day's charge
is the month-to-date charge at the end of that day minus the one at the end of the day before: daily invoices
add up to the monthly one, and the free tiers are used up by the first requests of the month.  The request
free tier is shared by both queue types and taken from standard requests first.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ferrymq.spark.prices import Prices, Tier

ITEMS = ("requests_standard", "requests_fifo", "transfer_out", "kms")


def usage_lines(records: DataFrame, date: str) -> DataFrame:
    """Per account, queue type and action class, on ``date``: requests, units, bytes and KMS calls."""
    return (
        records.where((F.col("date") == date) & F.col("account").isNotNull())
        .groupBy("account", "date", F.coalesce("queue_type", F.lit("standard")).alias("queue_type"), "action_class")
        .agg(
            F.count(F.lit(1)).alias("requests"),
            F.sum("billable_units").alias("billable_units"),
            F.sum("bytes_in").alias("bytes_in"),
            F.sum("bytes_out").alias("bytes_out"),
            F.sum("kms_calls").alias("kms_calls"),
        )
    )


def _tiered(total: Column, free: Column, tiers: tuple[Tier, ...]) -> Column:
    """Price of units ``free``..``total`` of a month, each tier priced over its own range of the running total."""
    amount: Column = F.lit(0.0)
    lower = 0.0
    for tier in tiers:
        upper = F.lit(float("inf")) if tier.up_to is None else F.lit(float(tier.up_to))
        start = F.greatest(F.lit(lower), free)
        covered = F.greatest(F.lit(0.0), F.least(total, upper) - start)
        amount = amount + covered * F.lit(tier.price)
        lower = float("inf") if tier.up_to is None else float(tier.up_to)
    return amount


def _month_to_date(std: Column, fifo: Column, out: Column, kms: Column, prices: Prices) -> dict[str, Column]:
    free_std = F.least(std, F.lit(float(prices.free_requests)))
    free_fifo = F.least(fifo, F.lit(float(prices.free_requests)) - free_std)
    free_out = F.least(out, F.lit(float(prices.transfer_free_bytes)))
    return {
        "requests_standard": _tiered(std, free_std, prices.requests["standard"]),
        "requests_fifo": _tiered(fifo, free_fifo, prices.requests["fifo"]),
        "transfer_out": _tiered(out, free_out, prices.transfer),
        "kms": F.greatest(F.lit(0.0), kms - F.lit(float(prices.kms_free))) * F.lit(prices.kms_per_call),
    }


def charges(records: DataFrame, date: str, prices: Prices) -> DataFrame:
    """One row per account billed on ``date`` and item: quantities and amounts of the day and month to date.

    ``records`` must hold the month's records up to ``date`` (with derived columns); accounts without a billed
    request on ``date`` get no rows (their month-to-date amount did not change).
    """
    billed = records.where(F.col("account").isNotNull() & (F.col("date") <= date))
    fifo = F.coalesce(F.col("queue_type"), F.lit("standard")) == "fifo"
    today = F.col("date") == date

    def total(value: Column, when: Column | None = None) -> Column:
        return F.sum(value if when is None else F.when(when, value).otherwise(0)).cast("double")

    sums = billed.groupBy("account").agg(
        total(F.when(~fifo, F.col("billable_units")).otherwise(0)).alias("std_mtd"),
        total(F.when(fifo, F.col("billable_units")).otherwise(0)).alias("fifo_mtd"),
        total(F.col("bytes_out")).alias("out_mtd"),
        total(F.col("kms_calls")).alias("kms_mtd"),
        total(F.when(~fifo, F.col("billable_units")).otherwise(0), today).alias("std_day"),
        total(F.when(fifo, F.col("billable_units")).otherwise(0), today).alias("fifo_day"),
        total(F.col("bytes_out"), today).alias("out_day"),
        total(F.col("kms_calls"), today).alias("kms_day"),
        F.sum(F.when(today, 1).otherwise(0)).alias("requests_day"),
    ).where(F.col("requests_day") > 0)
    now = _month_to_date(F.col("std_mtd"), F.col("fifo_mtd"), F.col("out_mtd"), F.col("kms_mtd"), prices)
    before = _month_to_date(F.col("std_mtd") - F.col("std_day"), F.col("fifo_mtd") - F.col("fifo_day"),
                            F.col("out_mtd") - F.col("out_day"), F.col("kms_mtd") - F.col("kms_day"), prices)
    quantities = {"requests_standard": "std", "requests_fifo": "fifo", "transfer_out": "out", "kms": "kms"}
    rows = [
        F.struct(
            F.lit(item).alias("item"),
            F.col(f"{quantities[item]}_day").alias("quantity_day"),
            F.col(f"{quantities[item]}_mtd").alias("quantity_mtd"),
            (now[item] - before[item]).alias("amount_day"),
            now[item].alias("amount_mtd"),
        )
        for item in ITEMS
    ]
    return (
        sums.select("account", F.explode(F.array(*rows)).alias("c"))
        .select(
            "account",
            F.lit(date).alias("date"),
            F.lit(date[:7]).alias("month"),
            "c.item",
            F.col("c.quantity_day").cast("long").alias("quantity_day"),
            F.col("c.quantity_mtd").cast("long").alias("quantity_mtd"),
            "c.amount_day",
            "c.amount_mtd",
            F.lit(prices.currency).alias("currency"),
        )
    )


def invoice_csv(account: str, date: str, rows: list[dict]) -> str:
    """One account's invoice for ``date`` (with its month to date) as CSV text, items in a fixed order."""
    by_item = {r["item"]: r for r in rows}
    lines = ["account,date,month,item,quantity_day,amount_day,quantity_month_to_date,amount_month_to_date,currency"]
    currency = rows[0]["currency"] if rows else ""
    day_total = month_total = 0.0
    for item in ITEMS:
        row = by_item.get(item)
        if row is None:
            continue
        day_total += row["amount_day"]
        month_total += row["amount_mtd"]
        lines.append(f"{account},{date},{date[:7]},{item},{row['quantity_day']},{row['amount_day']:.6f},"
                     f"{row['quantity_mtd']},{row['amount_mtd']:.6f},{currency}")
    lines.append(f"{account},{date},{date[:7]},total,,{day_total:.6f},,{month_total:.6f},{currency}")
    return "\n".join(lines) + "\n"
