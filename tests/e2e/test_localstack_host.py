"""``ferrymq up`` with S3 and KMS from LocalStack, run on the host (no Docker), and DynamoDB from the stand-in.

LocalStack's DynamoDB downloads DynamoDB Local and Java when it starts, which fails offline, so only S3 and KMS
come from it (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL_KMS``: boto3's per-service endpoints win over the
stand-in's ``AWS_ENDPOINT_URL``).  Sends, server-side encryption under the managed key (its alias in LocalStack's
KMS) and usage records flushed into LocalStack's S3 go through it.

LocalStack needs Python 3.13 (``localstack-core`` 2026.3): the test runs the interpreter of
``FERRYMQ_TEST_LOCALSTACK_PYTHON`` or ``.cache/localstack/bin/python`` (see localstack/README.md for the
install), and is skipped, saying so, where neither has LocalStack.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.support.ports import consecutive_free_ports
from tests.support.processes import terminate_group
from tests.support.sqs_clients import sqs_client
from tests.support.stack import Stack, started

REPO = Path(__file__).resolve().parents[2]
READY_SECONDS = 90


def _localstack_python() -> Path:
    named = os.environ.get("FERRYMQ_TEST_LOCALSTACK_PYTHON")
    python = Path(named) if named else REPO / ".cache" / "localstack" / "bin" / "python"
    if not python.exists():
        pytest.skip(f"LocalStack is not installed for {python} (localstack/README.md, 'LocalStack on the host')")
    found = subprocess.run([str(python), "-c", "import localstack.runtime.main"], capture_output=True, timeout=60,
                           check=False)
    if found.returncode != 0:
        pytest.skip(f"{python} has no localstack-core (localstack/README.md, 'LocalStack on the host')")
    return python


@pytest.fixture(scope="module")
def localstack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    python = _localstack_python()
    port = consecutive_free_ports(1)
    home = tmp_path_factory.mktemp("localstack")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env.update({"OVERRIDE_IN_DOCKER": "0", "GATEWAY_LISTEN": f"127.0.0.1:{port}", "SERVICES": "s3,kms",
                "LOCALSTACK_VOLUME_DIR": str(home / "volume"), "TMPDIR": str(home)})
    process = subprocess.Popen([str(python), "-m", "localstack.runtime.main"], cwd=home, env=env,
                               stdout=(home / "log.txt").open("wb"), stderr=subprocess.STDOUT,
                               start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_SECONDS
        while True:
            assert process.poll() is None, (home / "log.txt").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{endpoint}/_localstack/init/ready", timeout=2) as answer:
                    if json.loads(answer.read()).get("completed"):
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, (home / "log.txt").read_text()[-3000:]
            time.sleep(0.3)
        yield endpoint
    finally:
        terminate_group(process, 15)


@pytest.fixture(scope="module")
def stack_on_localstack(localstack: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from started(tmp_path_factory.mktemp("ferrymq-localstack"), {
        "AWS_ENDPOINT_URL_S3": localstack,
        "AWS_ENDPOINT_URL_KMS": localstack,
        "FERRYMQ_USAGE_FLUSH_SECONDS": "1",
    })


def _localstack_client(endpoint: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test")


def test_sends_with_managed_encryption_and_usage_records_go_through_localstack(
        localstack: str, stack_on_localstack: Stack) -> None:
    # given a queue encrypted under the service's managed key
    sqs = sqs_client(stack_on_localstack.endpoint, "json")
    url = sqs.create_queue(QueueName="on-localstack", Attributes={"SqsManagedSseEnabled": "true"})["QueueUrl"]
    # when messages are sent and received
    bodies = {f"message {i}" for i in range(5)}
    for body in sorted(bodies):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    received: set[str] = set()
    deadline = time.monotonic() + 30
    while received != bodies and time.monotonic() < deadline:
        answer = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        received.update(m["Body"] for m in answer.get("Messages", []))
    assert received == bodies
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["SqsManagedSseEnabled"])["Attributes"] == {
        "SqsManagedSseEnabled": "true"}
    # then the keys FerryMQ made and uses live in LocalStack's KMS
    kms = _localstack_client(localstack, "kms")
    aliases = {a["AliasName"]: a.get("TargetKeyId") for a in kms.list_aliases()["Aliases"]}
    assert aliases.get("alias/ferrymq/managed-sse") and aliases.get("alias/ferrymq/credentials")
    # and the usage records reach LocalStack's S3, naming the sends
    s3 = _localstack_client(localstack, "s3")
    bucket = stack_on_localstack.env.get("FERRYMQ_USAGE_BUCKET", "ferrymq-usage")
    actions: list[str] = []
    deadline = time.monotonic() + 30
    while "SendMessage" not in actions:
        assert time.monotonic() < deadline, f"no SendMessage usage record in s3://{bucket}: {actions}"
        for item in s3.list_objects_v2(Bucket=bucket, Prefix="usage/").get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            for line in gzip.decompress(body).decode().splitlines():
                actions.append(json.loads(line).get("action", ""))
        time.sleep(0.5)


def test_dynamodb_stays_with_the_stand_in(localstack: str, stack_on_localstack: Stack) -> None:
    # LocalStack serves no DynamoDB here; the stack's tables are the stand-in's.
    tables = stack_on_localstack.aws_client("dynamodb").list_tables()["TableNames"]
    assert any(name.endswith("queues") for name in tables)
    with pytest.raises(ClientError):
        _localstack_client(localstack, "dynamodb").list_tables()
