"""spark-submit spark/jobs/analytics.py --input s3://B/usage/v1 --output s3://B/derived --date YYYY-MM-DD

Per queue per hour: messages sent, received and deleted, empty receives, errors by code, latency percentiles by
action; the day's top accounts and queues; throttled and abusive clients.
"""

from __future__ import annotations

import sys

from ferrymq.spark.jobs import common
from ferrymq.spark.pipeline import run_jobs


def main(argv: list[str] | None = None) -> int:
    args = common.parser("analytics").parse_args(argv)
    return common.run("analytics", args, lambda io, stages: run_jobs(
        io, ["analytics"], args.input, args.output, args.date, stages=stages))


if __name__ == "__main__":
    sys.exit(main())
