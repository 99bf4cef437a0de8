"""LocalStack's init hook bootstraps FerryMQ's resources at whatever endpoint it is given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import boto3

from ferrymq.infra.template import TEMPLATE_PATH

HOOK = TEMPLATE_PATH.parent / "localstack" / "init" / "ready.d" / "10-ferrymq-bootstrap.sh"


def test_hook_creates_tables_bucket_and_key(aws_endpoint: str, tmp_path: Path) -> None:
    # given an AWS endpoint and a table prefix of this test's own
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": aws_endpoint,
        "FERRYMQ_SOURCE": str(TEMPLATE_PATH.parent),
        "FERRYMQ_PYTHON": sys.executable,
        "FERRYMQ_TABLE_PREFIX": "ferrymq-hook-",
        "FERRYMQ_USAGE_BUCKET": "ferrymq-hook-usage",
    }
    # when LocalStack would run the hook (from any working directory)
    result = subprocess.run(["bash", str(HOOK)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    # then it succeeds and FerryMQ's resources exist there
    assert result.returncode == 0, result.stderr
    tables = boto3.client("dynamodb", endpoint_url=aws_endpoint).list_tables()["TableNames"]
    assert {"ferrymq-hook-queues", "ferrymq-hook-credentials", "ferrymq-hook-partitions", "ferrymq-hook-dedup"} <= set(
        tables
    )
    buckets = [b["Name"] for b in boto3.client("s3", endpoint_url=aws_endpoint).list_buckets()["Buckets"]]
    assert "ferrymq-hook-usage" in buckets
