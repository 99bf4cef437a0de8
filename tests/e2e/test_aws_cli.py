"""The AWS CLI against a running stack, as a user types it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def _aws(stack: Any, *args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("aws", path=str(Path(sys.executable).parent)) or shutil.which("aws")
    assert exe, "the AWS CLI is installed with the test extras"
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": stack.access_key,
        "AWS_SECRET_ACCESS_KEY": stack.secret_key,
        "AWS_DEFAULT_REGION": stack.region,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    env.pop("AWS_ENDPOINT_URL", None)
    return subprocess.run(
        [exe, "sqs", *args, "--endpoint-url", stack.endpoint, "--output", "json"],
        capture_output=True, text=True, env=env, timeout=60,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_cli_queue_and_message_life_cycle(stack: Any) -> None:
    url = _ok(_aws(stack, "create-queue", "--queue-name", "cli-queue", "--attributes", "VisibilityTimeout=40"))[
        "QueueUrl"
    ]
    assert url in _ok(_aws(stack, "list-queues", "--queue-name-prefix", "cli-"))["QueueUrls"]
    sent = _ok(_aws(stack, "send-message", "--queue-url", url, "--message-body", "from the cli",
                    "--message-attributes", '{"k": {"DataType": "String", "StringValue": "v"}}'))
    assert sent["MessageId"]
    got = _ok(_aws(stack, "receive-message", "--queue-url", url, "--message-attribute-names", "All",
                   "--wait-time-seconds", "2"))["Messages"][0]
    assert got["Body"] == "from the cli"
    assert got["MessageAttributes"]["k"]["StringValue"] == "v"
    _ok(_aws(stack, "delete-message", "--queue-url", url, "--receipt-handle", got["ReceiptHandle"]))
    attrs = _ok(_aws(stack, "get-queue-attributes", "--queue-url", url, "--attribute-names", "All"))["Attributes"]
    assert attrs["VisibilityTimeout"] == "40"
    assert attrs["ApproximateNumberOfMessages"] == "0"
    _ok(_aws(stack, "delete-queue", "--queue-url", url))


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("get-queue-url", "--queue-name", "cli-no-such-queue"), "AWS.SimpleQueueService.NonExistentQueue"),
        (("create-queue", "--queue-name", "bad name"), "InvalidParameterValue"),
    ],
)
def test_cli_reports_sqs_errors(stack: Any, args: tuple[str, ...], code: str) -> None:
    result = _aws(stack, *args)
    assert result.returncode != 0
    assert f"({code})" in result.stderr


def test_cli_fifo_dead_letter_and_move_task(stack: Any) -> None:
    # a FIFO dead-letter queue and a FIFO source redriving to it after one receive
    dlq = _ok(_aws(stack, "create-queue", "--queue-name", "cli-dlq.fifo", "--attributes", "FifoQueue=true"))["QueueUrl"]
    dlq_arn = _ok(_aws(stack, "get-queue-attributes", "--queue-url", dlq, "--attribute-names", "QueueArn"))[
        "Attributes"]["QueueArn"]
    src = _ok(_aws(stack, "create-queue", "--queue-name", "cli-src.fifo", "--attributes", json.dumps({
        "FifoQueue": "true", "ContentBasedDeduplication": "true",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})})))["QueueUrl"]
    sent = _ok(_aws(stack, "send-message", "--queue-url", src, "--message-body", "fifo via cli",
                    "--message-group-id", "g1"))
    assert len(sent["SequenceNumber"]) == 20
    got = _ok(_aws(stack, "receive-message", "--queue-url", src, "--visibility-timeout", "0",
                   "--attribute-names", "All"))["Messages"][0]
    assert got["Attributes"]["MessageGroupId"] == "g1"
    assert _ok(_aws(stack, "receive-message", "--queue-url", src, "--wait-time-seconds", "1")) is None
    assert _ok(_aws(stack, "list-dead-letter-source-queues", "--queue-url", dlq))["queueUrls"] == [src]
    # a move task puts it back in the source
    _ok(_aws(stack, "start-message-move-task", "--source-arn", dlq_arn))
    tasks: list[dict] = []
    for _ in range(50):
        tasks = _ok(_aws(stack, "list-message-move-tasks", "--source-arn", dlq_arn))["Results"]
        if tasks and tasks[0]["Status"] == "COMPLETED":
            break
    assert tasks[0]["Status"] == "COMPLETED" and tasks[0]["ApproximateNumberOfMessagesMoved"] == 1
    back = _ok(_aws(stack, "receive-message", "--queue-url", src, "--wait-time-seconds", "2"))["Messages"][0]
    assert back["Body"] == "fifo via cli"
