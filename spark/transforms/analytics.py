"""Queue analytics: per queue per hour traffic, errors and latency; the day's top accounts and queues; clients
whose error rate or request rate stands out.

Only requests that named a queue count towards a queue; refused requests count for the client (by access
key when no account is known) in the outlier detection.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ferrymq.errors import OverLimit, RequestThrottled, Throttling
from ferrymq.usage import schema

THROTTLE_CODES = tuple(error.query_code for error in (Throttling, RequestThrottled, OverLimit))
"""Outcomes (records keep query codes) that mean the client was held back, not that it asked for something wrong."""
PERCENTILES = (0.5, 0.95, 0.99)
UNPARSEABLE_QUEUE = "(unparseable queue URL)"
"""The one queue every record naming something that is not a queue's ARN counts towards (a request to a
malformed queue URL names whatever the URL held); such records are counted in the analytics summary."""
QUEUE_ARN_PATTERN = r"^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,80}(\.fifo)?$"
MIN_CLIENTS = 5
"""Clients an hour needs before one of them can be a request-rate outlier: the median of fewer says nothing
about what is usual, and a lone busy account is not abuse."""


def _ok() -> Column:
    return F.col("outcome") == schema.SUCCESS


def _count(condition: Column) -> Column:
    return F.sum(F.when(condition, 1).otherwise(0)).cast("long")


def _sum(value: Column, condition: Column) -> Column:
    return F.sum(F.when(condition, value).otherwise(0)).cast("long")


def unparseable_queue() -> Column:
    """Whether a record names a queue that is not a queue's ARN (null ``queue_arn``: it named none)."""
    return F.col("queue_arn").isNotNull() & ~F.col("queue_arn").rlike(QUEUE_ARN_PATTERN)


def with_queue_bucket(records: DataFrame) -> DataFrame:
    """``records`` with every unparseable ``queue_arn`` replaced by :data:`UNPARSEABLE_QUEUE`."""
    return records.withColumn("queue_arn", F.when(unparseable_queue(), F.lit(UNPARSEABLE_QUEUE))
                              .otherwise(F.col("queue_arn")))


def queue_hourly(records: DataFrame) -> DataFrame:
    """Per queue and hour: requests, messages sent, received and deleted, empty receives, errors, error rate."""
    accepted = F.col("messages_in") - F.col("entries_failed")
    return (
        records.where(F.col("queue_arn").isNotNull())
        .groupBy("queue_arn", "hour")
        .agg(
            F.count(F.lit(1)).alias("requests"),
            _sum(accepted, _ok() & (F.col("action_class") == "send")).alias("messages_sent"),
            _sum(F.col("messages_out"), _ok() & (F.col("action") == "ReceiveMessage")).alias("messages_received"),
            _sum(accepted, _ok() & (F.col("action_class") == "delete")).alias("messages_deleted"),
            _count(_ok() & (F.col("action") == "ReceiveMessage") & (F.col("messages_out") == 0)).alias(
                "empty_receives"),
            _count(~_ok()).alias("errors"),
        )
        .withColumn("error_rate", F.col("errors") / F.col("requests"))
    )


def errors_by_code(records: DataFrame) -> DataFrame:
    """Per queue (null: none named) and hour, each error code's count and share of that queue-hour's requests."""
    totals = records.groupBy("queue_arn", "hour").agg(F.count(F.lit(1)).alias("requests"))
    errors = records.where(~_ok()).groupBy("queue_arn", "hour", "outcome").agg(F.count(F.lit(1)).alias("count"))
    return (
        errors.join(totals, on=[totals["hour"] == errors["hour"],
                                totals["queue_arn"].eqNullSafe(errors["queue_arn"])])
        .select(errors["queue_arn"], errors["hour"], "outcome", "count", (F.col("count") / F.col("requests"))
                .alias("rate"))
    )


def latency(records: DataFrame) -> DataFrame:
    """Per queue, hour and action: exact latency percentiles (linear interpolation between ranks)."""
    return (
        records.where(F.col("queue_arn").isNotNull())
        .groupBy("queue_arn", "hour", "action")
        .agg(
            F.count(F.lit(1)).alias("requests"),
            *(F.percentile("latency_ms", F.lit(p)).alias(f"p{round(p * 100)}") for p in PERCENTILES),
        )
    )


def top(records: DataFrame, column: str, n: int = 10) -> DataFrame:
    """The ``n`` busiest values of ``column`` (``account`` or ``queue_arn``) of the day, by requests then name."""
    counted = records.where(F.col(column).isNotNull()).groupBy(column).agg(
        F.count(F.lit(1)).alias("requests"), F.sum("billable_units").cast("long").alias("billable_units"),
        _count(~_ok()).alias("errors"))
    ranked = counted.withColumn("rank", F.row_number().over(Window.orderBy(F.desc("requests"), F.asc(column))))
    return ranked.where(F.col("rank") <= n)


def outliers(records: DataFrame, *, min_requests: int = 20, error_rate: float = 0.5,
             rate_factor: float = 10.0, min_clients: int = MIN_CLIENTS) -> DataFrame:
    """Clients (account, else access key) per hour, flagged when throttled, mostly failing, or far busier than
    the hour's median client.

    - ``throttled``: at least one throttling outcome;
    - ``error_rate_outlier``: at least ``min_requests`` requests and an error rate of ``error_rate`` or more;
    - ``request_rate_outlier``: at least ``min_requests`` requests, more than ``rate_factor`` times the
      median requests of the clients seen in that hour, and at least ``min_clients`` clients in that hour
      (an outlier needs a population to stand out from).

    Only flagged client-hours are returned.
    """
    client = F.coalesce(F.col("account"), F.concat(F.lit("key:"), F.col("access_key_id")), F.lit("anonymous"))
    per_client = records.groupBy(client.alias("client"), "hour").agg(
        F.count(F.lit(1)).alias("requests"),
        _count(~_ok()).alias("errors"),
        _count(F.col("outcome").isin(*THROTTLE_CODES)).alias("throttled_requests"),
    )
    medians = per_client.groupBy("hour").agg(F.percentile("requests", F.lit(0.5)).alias("median_requests"),
                                             F.count(F.lit(1)).alias("clients"))
    flagged = (
        per_client.join(medians, "hour")
        .withColumn("error_rate", F.col("errors") / F.col("requests"))
        .withColumn("throttled", F.col("throttled_requests") > 0)
        .withColumn("error_rate_outlier",
                    (F.col("requests") >= min_requests) & (F.col("error_rate") >= error_rate))
        .withColumn("request_rate_outlier",
                    (F.col("requests") >= min_requests) & (F.col("clients") >= min_clients)
                    & (F.col("requests") > F.col("median_requests") * rate_factor))
    )
    return flagged.where(F.col("throttled") | F.col("error_rate_outlier") | F.col("request_rate_outlier"))
