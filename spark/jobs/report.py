"""spark-submit spark/jobs/report.py --output s3://B/derived --date YYYY-MM-DD

Renders the date's analytics and charges (run analytics and billing first) as an HTML page with charts,
written to ``<output>/reports/dt=D/report.html``; the summary printed names it.
"""

from __future__ import annotations

import sys

from ferrymq.spark.jobs import common
from ferrymq.spark.pipeline import run_report


def main(argv: list[str] | None = None) -> int:
    parser = common.parser("report", needs_input=False)
    parser.add_argument("--input", help="ignored: the report reads the other jobs' output")
    args = parser.parse_args(argv)
    return common.run("report", args, lambda io: run_report(io, args.output, args.date))


if __name__ == "__main__":
    sys.exit(main())
