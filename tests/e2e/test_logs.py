"""The stack's logs: JSON lines without the libraries' INFO chatter at the default level, and one request id
from the client's response through the gateway's line to the storage worker's."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from tests.support.sqs_clients import sqs_client
from tests.support.stack import Stack, started
from tests.support.waiting import wait_for

LIBRARIES = ("botocore", "boto3", "urllib3", "s3transfer", "moto", "werkzeug", "uvicorn.access")


def _json_lines(stack: Stack) -> list[dict]:
    """The JSON log lines in the stack's ``up.log`` (its banner and forwarded stdout are not JSON)."""
    lines = []
    for text in stack.log_path.read_text(errors="replace").splitlines():
        if text.startswith("{"):
            lines.append(json.loads(text))
    return lines


@pytest.fixture
def debug_stack(tmp_path: Path) -> Iterator[Stack]:
    """A stack of the test's own, every process logging at DEBUG."""
    yield from started(tmp_path / "ferrymq", {"FERRYMQ_LOG_LEVEL": "DEBUG"})


def test_a_default_stack_logs_json_without_library_info_lines(stack: Stack) -> None:
    # given the session's stack at the default level, having served requests (and made AWS calls to start)
    sqs = sqs_client(stack.endpoint, "json", access_key=stack.access_key, secret_key=stack.secret_key,
                     region=stack.region)
    url = sqs.create_queue(QueueName=f"logs-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    # when its log is read
    text = stack.log_path.read_text(errors="replace")
    lines = _json_lines(stack)
    # then its processes wrote JSON lines, and no library line below WARNING is among them
    assert {"worker", "up"} <= {line["component"] for line in lines}
    chatter = [line for line in lines
               if line["logger"].startswith(LIBRARIES) and line["level"] in ("DEBUG", "INFO")]
    assert chatter == []
    assert "Found credentials" not in text


def test_one_request_id_from_the_client_through_the_gateway_to_the_worker(debug_stack: Stack) -> None:
    # given a queue whose message was received and then deleted
    sqs = sqs_client(debug_stack.endpoint, "json", access_key=debug_stack.access_key,
                     secret_key=debug_stack.secret_key, region=debug_stack.region)
    url = sqs.create_queue(QueueName=f"trace-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="gone soon")
    (message,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    # when a request the worker must refuse is made: the visibility of the deleted message
    with pytest.raises(ClientError) as refused:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=5)
    request_id = refused.value.response["ResponseMetadata"]["RequestId"]
    assert request_id
    # then the same id is in a gateway line about its failure and in the worker's line about the request (each
    # process's lines reach up.log through `up`, in their own time: they are waited for, boundedly)
    def both() -> list[dict] | None:
        mine = [line for line in _json_lines(debug_stack) if line.get("request_id") == request_id]
        gateway = [line for line in mine if line["component"] == "gateway"]
        worker = [line for line in mine if line["component"] == "worker"]
        found = (any(f"request {request_id} failed" in line["message"] for line in gateway)
                 and any(line["message"].startswith("CHANGE_VISIBILITY request") for line in worker))
        return mine if found else None

    wait_for(both, timeout=10.0)
