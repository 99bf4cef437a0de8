"""spark-submit spark/jobs/billing.py --input s3://B/usage/v1 --output s3://B/derived --date YYYY-MM-DD

Per account: the day's and the month's billable requests by queue type and action class less the free tier,
data transfer and KMS calls, priced from ``--prices`` (SQS's public prices by default); a Parquet table and
one CSV invoice per account.
"""

from __future__ import annotations

import sys

from ferrymq.spark.jobs import common
from ferrymq.spark.pipeline import run_jobs
from ferrymq.spark.prices import DEFAULT_PRICES, Prices


def main(argv: list[str] | None = None) -> int:
    parser = common.parser("billing")
    parser.add_argument("--prices", default=str(DEFAULT_PRICES), help="price table (JSON)")
    args = parser.parse_args(argv)
    prices = Prices.load(args.prices)
    return common.run("billing", args, lambda io, stages: run_jobs(
        io, ["billing"], args.input, args.output, args.date, prices, stages))


if __name__ == "__main__":
    sys.exit(main())
