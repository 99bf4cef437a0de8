#!/usr/bin/env bash
# LocalStack runs this once its services are ready: FerryMQ's bootstrap creates the tables, the usage
# bucket and the KMS key described in template.yaml (idempotent, like `ferrymq bootstrap`).
#
# FERRYMQ_SOURCE is the repository (mounted at /opt/ferrymq by docker-compose.yml); the bootstrap needs
# only boto3 and PyYAML, which LocalStack's own Python environment has.
set -euo pipefail

source_dir="${FERRYMQ_SOURCE:-/opt/ferrymq}"
python="${FERRYMQ_PYTHON:-python3}"

export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://localhost:4566}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"

PYTHONPATH="${source_dir}:${source_dir}/layers/ferrymq/python" "$python" -c '
from ferrymq.settings import Settings
from ferrymq.infra.bootstrap import bootstrap

settings = Settings.from_env()
bootstrap(settings)
print(f"FerryMQ: tables {settings.table_prefix}*, bucket {settings.usage_bucket} and KMS key are ready")
'
