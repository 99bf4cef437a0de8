"""Push delivery to a Lambda function, through the deploy lane's emulator (MiniStack runs Python functions
without Docker): ``ferrymq up`` with ``AWS_ENDPOINT_URL_LAMBDA`` pointed at it invokes the function with Lambda's SQS
event, deletes what it took, and keeps what it reported failed until the dead-letter queue takes it."""

from __future__ import annotations

import io
import json
import socket
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ferrymq
from ferrymq.infra.deploy_local import MiniStack
from tests.e2e.conftest import Stack, new_queue
from tests.support.stack import started
from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
MINISTACK = REPO / ".cache" / "ministack" / "bin" / "ministack"

# The function records each body it is given in a file of the test's, and reports bodies starting "bad" failed.
FUNCTION = """import json
def handler(event, context):
    with open({seen!r}, "a") as out:
        for r in event["Records"]:
            out.write(json.dumps(r) + "\\n")
    return {{"batchItemFailures": [{{"itemIdentifier": r["messageId"]}} for r in event["Records"]
                                   if r["body"].startswith("bad")]}}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniStack]:
    if not MINISTACK.exists():
        pytest.fail(f"MiniStack is not installed: run `make test` or `make deploy-local` (it goes to {MINISTACK})")
    running = MiniStack(str(MINISTACK), _free_port(), tmp_path_factory.mktemp("ministack"))
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def lambda_stack(tmp_path_factory: pytest.TempPathFactory, emulator: MiniStack) -> Iterator[Stack]:
    yield from started(tmp_path_factory.mktemp("push-lambda"), {"AWS_ENDPOINT_URL_LAMBDA": emulator.url})


def _function(emulator: MiniStack, name: str, source: str) -> str:
    """The ARN of a Python function ``name`` made in the emulator from ``source`` (its ``app.py``)."""
    package = io.BytesIO()
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("app.py", source)
    return emulator.client("lambda").create_function(
        FunctionName=name, Runtime="python3.11", Role=f"arn:aws:iam::000000000000:role/{name}",
        Handler="app.handler", Code={"ZipFile": package.getvalue()})["FunctionArn"]


def _clients(stack: Stack) -> tuple[Any, Any]:
    """SQS and FerryMQ API clients of ``stack``'s admin key."""
    keys = {"endpoint_url": stack.endpoint, "region_name": stack.region,
            "aws_access_key_id": stack.access_key, "aws_secret_access_key": stack.secret_key}
    return ferrymq.client("sqs", **keys), ferrymq.client("ferrymq", **keys)


def test_a_function_target_gets_the_event_and_its_reported_failures_reach_the_dead_letter_queue(
    tmp_path: Path, emulator: MiniStack, lambda_stack: Stack
) -> None:
    # given a function in the emulator
    seen = tmp_path / "seen.jsonl"
    function = _function(emulator, "consumer", FUNCTION.format(seen=str(seen)))
    sqs, api = _clients(lambda_stack)
    dlq = new_queue(sqs, "lambda-dlq")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = new_queue(sqs, "lambda", VisibilityTimeout="1",
                    RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}))
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    # when the queue is mapped to it with ReportBatchItemFailures and messages arrive
    mapping = api.create_event_source_mapping(EventSourceArn=arn, FunctionName=function,
                                              FunctionResponseTypes=["ReportBatchItemFailures"])
    assert mapping["FunctionArn"] == function and "SigningSecret" not in mapping
    bodies = ["good 1", "good 2", "bad 1"]
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)

    def left(queue: str) -> int:
        counts = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
        return int(counts["ApproximateNumberOfMessages"]) + int(counts["ApproximateNumberOfMessagesNotVisible"])

    # then the function gets Lambda's records, the good ones are deleted, and the bad one reaches the DLQ after two
    wait_for(lambda: left(url) == 0 and left(dlq) == 1, timeout=90)
    records = [json.loads(line) for line in seen.read_text().splitlines()]
    assert sorted(r["body"] for r in records) == ["bad 1", "bad 1", "good 1", "good 2"]
    assert all(r["eventSource"] == "aws:sqs" and r["eventSourceARN"] == arn for r in records)
    assert sqs.receive_message(QueueUrl=dlq, WaitTimeSeconds=5)["Messages"][0]["Body"] == "bad 1"
    assert api.get_event_source_mapping(UUID=mapping["UUID"])["LastProcessingResult"] == "OK"
    api.delete_event_source_mapping(UUID=mapping["UUID"])


def test_a_function_that_fails_keeps_the_batch(tmp_path: Path, emulator: MiniStack, lambda_stack: Stack) -> None:
    function = _function(emulator, "failing", "def handler(event, context):\n    raise RuntimeError('no')\n")
    sqs, api = _clients(lambda_stack)
    url = new_queue(sqs, "lambda-failing", VisibilityTimeout="1")
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    mapping = api.create_event_source_mapping(EventSourceArn=arn, FunctionName=function)
    sqs.send_message(QueueUrl=url, MessageBody="kept")
    # the function error is the mapping's last result, and the message stays, received again and again
    wait_for(lambda: "Function error" in api.get_event_source_mapping(UUID=mapping["UUID"])["LastProcessingResult"],
             timeout=60)
    api.delete_event_source_mapping(UUID=mapping["UUID"])
    got = wait_for(lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2,
                                               MessageSystemAttributeNames=["ApproximateReceiveCount"]).get("Messages"),
                   timeout=30)
    assert got[0]["Body"] == "kept" and int(got[0]["Attributes"]["ApproximateReceiveCount"]) >= 2
