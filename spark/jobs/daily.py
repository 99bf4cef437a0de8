"""spark-submit spark/jobs/daily.py --input s3://B/usage/v1 --output s3://B/derived --date YYYY-MM-DD
[--jobs billing,analytics,report]

The jobs named (all three by default) in one session, in that order, reading the usage once: what a day's run
costs is mostly Spark's fixed cost (its start, a job per output), paid once instead of once per job.  One JSON
summary line per job.
"""

from __future__ import annotations

import argparse
import sys

from ferrymq.spark.jobs import JOBS, common
from ferrymq.spark.pipeline import run_jobs
from ferrymq.spark.prices import DEFAULT_PRICES, Prices


def _jobs(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in JOBS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(JOBS)}, not {text!r}")
    return [name for name in JOBS if name in names]


def main(argv: list[str] | None = None) -> int:
    parser = common.parser("daily")
    parser.add_argument("--jobs", type=_jobs, default=list(JOBS), help=f"comma-separated, of {', '.join(JOBS)}")
    parser.add_argument("--prices", default=str(DEFAULT_PRICES), help="price table for billing (JSON)")
    args = parser.parse_args(argv)
    prices = Prices.load(args.prices)
    return common.run("daily", args, lambda io, stages: run_jobs(
        io, args.jobs, args.input, args.output, args.date, prices, stages),
        needs_spark=args.jobs != ["report"])


if __name__ == "__main__":
    sys.exit(main())
