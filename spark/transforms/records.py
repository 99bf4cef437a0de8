"""Usage lines -> typed records, and malformed lines -> quarantine, by the rules of :mod:`ferrymq.usage.schema`.

A line is quarantined when it is not JSON, not an object, not version 1, misses a field that may not be null,
has a value of the wrong type, a ``ts`` that is not an ISO 8601 UTC time, or a ``ts`` outside the ``dt=``
partition of its object (objects are partitioned by their records' own hour, so that means a misplaced line).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DoubleType, LongType, StringType, StructField, StructType

from ferrymq.usage import schema

_TYPES: dict[str, DataType] = {"string": StringType(), "int": LongType(), "float": DoubleType()}
TS_PATTERN = f"^{schema.TS_REGEX}$"

RECORD_SCHEMA = StructType([StructField(f.name, _TYPES[f.type], True) for f in schema.FIELDS])
"""Every field nullable on read, so that a missing value is seen (and quarantined) rather than refused."""


_STRING_FIELDS = "|".join(f.name for f in schema.FIELDS if f.type == "string")
# A string field whose value starts with anything but a quote or null: from_json would cast 12 or true into a
# string silently.  One regular expression over the line, instead of one JSON lookup per field.
_NOT_A_STRING = rf'"({_STRING_FIELDS})"\s*:\s*[^"n\s]'


def _reason(parsed: Column) -> Column:
    """Why a line is malformed, or null.  Numbers are checked by from_json itself: it leaves a number field null
    when the JSON holds a string, a fraction or a boolean there, and every number field is required."""
    checks: list[tuple[Column, str]] = [
        (parsed.isNull(), "not a JSON object"),
        (parsed["v"].isNull() | (parsed["v"] != schema.VERSION), "wrong version"),
    ]
    for spec in schema.FIELDS:
        if not spec.nullable:
            checks.append((parsed[spec.name].isNull(), f"{spec.name} missing or not {spec.type}"))
    checks.append((F.col("value").rlike(_NOT_A_STRING), "a string field holds another type"))
    checks.append((~parsed["ts"].rlike(TS_PATTERN), "ts is not an ISO 8601 UTC time"))
    reason: Column = F.lit(None).cast("string")
    for condition, text in reversed(checks):
        reason = F.when(F.coalesce(condition, F.lit(False)), F.lit(text)).otherwise(reason)
    return reason


def source_date(source: Column) -> Column:
    """The ``dt=YYYY-MM-DD`` partition an object's key names (null when it names none)."""
    return F.nullif(F.regexp_extract(source, r"dt=(\d{4}-\d{2}-\d{2})", 1), F.lit(""))


def check(lines: DataFrame) -> DataFrame:
    """``lines`` (source, value) -> (source, date, <the record's fields>, reason, value): ``reason`` null for a
    valid record, ``value`` kept only for a malformed one (what a cache of this frame then holds is columnar
    records, not the text of every line).  ``date`` is the line's object's ``dt=`` partition."""
    parsed = F.from_json(F.col("value"), RECORD_SCHEMA, {"mode": "PERMISSIVE"})
    checked = (lines.select("source", source_date(F.col("source")).alias("date"), "value", parsed.alias("r"))
               .withColumn("reason", _reason(F.col("r"))))
    reason = F.when(F.col("reason").isNull() & (F.substring(F.col("r.ts"), 1, 10) != F.col("date")),
                    F.lit("ts outside its object's date partition")).otherwise(F.col("reason"))
    # Flat columns, not the struct: caching a struct column of millions of rows needs far more memory.
    return checked.select("source", "date", "r.*", reason.alias("reason"),
                          F.when(reason.isNotNull(), F.col("value")).alias("value"))


def split(checked: DataFrame) -> tuple[DataFrame, DataFrame]:
    """A frame from :func:`check` -> (records, quarantine (source, date, value, reason))."""
    records = checked.where(F.col("reason").isNull()).select(*schema.FIELD_NAMES)
    quarantine = checked.where(F.col("reason").isNotNull()).select("source", "date", "value", "reason")
    return records, quarantine


def parse(lines: DataFrame) -> tuple[DataFrame, DataFrame]:
    """``lines`` (source, value) -> (records, quarantine (source, date, value, reason)).

    ``date`` of a quarantined line is its object's partition, so each date's quarantine can be written apart.
    """
    return split(check(lines))


def with_derived(records: DataFrame) -> DataFrame:
    """Adds ``date``, ``hour`` (``YYYY-MM-DDTHH``), ``action_class`` and ``owner`` (the queue's account)."""
    action_class: Column = F.lit(schema.MANAGEMENT)
    for action, kind in schema.ACTION_CLASSES.items():
        action_class = F.when(F.col("action") == action, F.lit(kind)).otherwise(action_class)
    return (
        records.withColumn("date", F.substring("ts", 1, 10))
        .withColumn("hour", F.substring("ts", 1, 13))
        .withColumn("action_class", action_class)
        .withColumn("owner", F.split(F.col("queue_arn"), ":").getItem(4))
    )
