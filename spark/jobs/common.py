"""What every job entry shares: its arguments, its session, its I/O, and printing its summary."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from ferrymq.settings import Settings
from ferrymq.spark.io import Io
from ferrymq.spark.pipeline import check_date
from ferrymq.spark.timing import Stages


def parser(job: str, *, needs_input: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"spark/jobs/{job}.py", description=f"FerryMQ usage: the {job} job.")
    if needs_input:
        parser.add_argument("--input", required=True, help="usage prefix, e.g. s3://ferrymq-usage/usage/v1")
    parser.add_argument("--output", required=True, help="output prefix, e.g. s3://ferrymq-usage/derived")
    parser.add_argument("--date", required=True, type=check_date, help="the day to process, YYYY-MM-DD (UTC)")
    parser.add_argument("--master", help="Spark master when not run by spark-submit (default local[2])")
    return parser


def run(job: str, args: argparse.Namespace, work: Callable[[Io, Stages], list[dict[str, Any]]], *,
        needs_spark: bool = True) -> int:
    """Build the job's I/O (with a session only when ``needs_spark``), run ``work``, print each summary as one
    JSON line on stdout and each stage's time as one line on stderr."""
    settings = Settings.from_env()
    stages = Stages(sys.stderr)
    spark = None
    if needs_spark:
        from ferrymq.spark import session

        with stages.stage("session"):
            spark = session.build(f"ferrymq-{job}", args.master)
    try:
        summaries = work(Io(spark, endpoint_url=settings.aws_endpoint_url, region=settings.region), stages)
    finally:
        if spark is not None:
            spark.stop()
    for summary in summaries:
        print(json.dumps(summary, sort_keys=True))
    return 0
