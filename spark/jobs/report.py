"""spark-submit spark/jobs/report.py --output s3://B/derived --date YYYY-MM-DD

Renders the date's analytics and charges (run analytics and billing first) as an HTML page with charts,
written to ``<output>/reports/dt=D/report.html``; the summary printed names it.  Needs no Spark session.
"""

from __future__ import annotations

import sys

from ferrymq.spark.jobs import common
from ferrymq.spark.pipeline import run_jobs


def main(argv: list[str] | None = None) -> int:
    parser = common.parser("report", needs_input=False)
    parser.add_argument("--input", help="ignored: the report reads the other jobs' output")
    args = parser.parse_args(argv)
    # The report reads a few hundred rows through boto3 and renders them in Python: no Spark session to start.
    return common.run("report", args, lambda io, stages: run_jobs(
        io, ["report"], args.input or "", args.output, args.date, stages=stages), needs_spark=False)


if __name__ == "__main__":
    sys.exit(main())
