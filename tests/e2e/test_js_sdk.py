"""The AWS SDK for JavaScript v3 against the running stack.

Each scenario is a Node script in ``tests/e2e/js`` that drives ``@aws-sdk/client-sqs`` and prints one JSON
object of what it saw; the tests here run it and assert on that object. The SDK checks MD5OfMessageBody on
every send and receive by itself (a mismatch ends the script with an error); the scripts add the check of
MD5OfMessageAttributes. ``make test`` installs the SDK with ``npm ci`` from the committed lock file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Stack

JS_DIR = Path(__file__).with_name("js")
SCENARIO_TIMEOUT = 120.0
# The account of the development key `ferrymq up` creates (FERRYMQ_ACCOUNT_ID's default).
DEV_ACCOUNT = "000000000000"


class NodeScenarios:
    """Runs the scenario scripts against one stack, with its endpoint and key and nothing from the shell."""

    def __init__(self, node: str, stack: Stack) -> None:
        self._node = node
        self._env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        self._env.update(
            {
                "SQS_ENDPOINT": stack.endpoint,
                "SQS_REGION": stack.region,
                "SQS_ACCESS_KEY_ID": stack.access_key,
                "SQS_SECRET_ACCESS_KEY": stack.secret_key,
                # Nothing from a developer's AWS profile may reach the SDK.
                "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            }
        )

    def run(self, script: str, *args: str) -> dict[str, Any]:
        result = subprocess.run(
            [self._node, str(JS_DIR / script), *args],
            cwd=JS_DIR,
            env=self._env,
            capture_output=True,
            text=True,
            timeout=SCENARIO_TIMEOUT,
        )
        assert result.returncode == 0, f"{script} {' '.join(args)} failed:\n{result.stderr}"
        return dict(json.loads(result.stdout))


@pytest.fixture(scope="module")
def scenarios(stack: Stack) -> NodeScenarios:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: these tests need Node.js 20 or newer")
    if not (JS_DIR / "node_modules" / "@aws-sdk" / "client-sqs").is_dir():
        pytest.fail(f"the AWS SDK for JavaScript is not installed: run `make test` (or `npm ci` in {JS_DIR})")
    return NodeScenarios(node, stack)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# Each feature below has tests of its own, so a feature that is missing or broken fails only its own tests.

# --- standard queues ---------------------------------------------------------------------------------


def test_standard_queue_life_cycle_with_digests(scenarios: NodeScenarios, stack: Stack) -> None:
    # given a new queue, when the SDK sends a message with attributes of every type and works it through
    name = _name("js-standard")
    result = scenarios.run("standard_queue.mjs", name)
    expected = result["expected"]

    # then the queue has the URL and ARN of the development account (an IP endpoint: the path form, naming the
    # region)
    assert result["queueUrl"] == f"{stack.endpoint}/queue/us-east-1/{DEV_ACCOUNT}/{name}"
    assert result["queueArn"] == f"arn:aws:sqs:{stack.region}:{DEV_ACCOUNT}:{name}"
    # and the send's digests match the ones computed on the client
    assert expected["md5OfBody"] == hashlib.md5(expected["body"].encode()).hexdigest()
    assert result["sent"]["md5OfMessageBody"] == expected["md5OfBody"]
    assert result["sent"]["md5OfMessageAttributes"] == expected["md5OfMessageAttributes"]
    # and the message arrives exactly as sent, with the same digests
    [first] = result["firstReceive"]
    assert first["messageId"] == result["sent"]["messageId"]
    assert first["body"] == expected["body"]
    assert first["md5OfBody"] == expected["md5OfBody"]
    assert first["messageAttributes"] == expected["messageAttributes"]
    assert first["md5OfMessageAttributes"] == expected["md5OfMessageAttributes"]
    assert first["attributes"]["ApproximateReceiveCount"] == "1"
    # and it stays hidden while in flight, then comes back at once when its visibility is set to 0
    assert result["whileInFlight"] == []
    [second] = result["secondReceive"]
    assert second["messageId"] == first["messageId"]
    assert second["receiptHandle"] != first["receiptHandle"]
    assert second["attributes"]["ApproximateReceiveCount"] == "2"
    # and once deleted it never comes back, and the deleted queue is no longer listed
    assert result["afterDelete"] == []
    assert result["listedAfterDelete"] == []


def test_batch_send_lists_the_invalid_entry_under_failed(scenarios: NodeScenarios) -> None:
    # given a batch of three entries, the middle one with a character SQS does not allow
    # when the SDK sends it
    result = scenarios.run("batch_send.mjs", _name("js-batch"))

    # then the good entries succeed with the client's digests, and only the bad one is listed as failed
    expected = result["expected"]
    successful = {entry["id"]: entry for entry in result["successful"]}
    assert sorted(successful) == ["first", "third"]
    for entry_id, entry in successful.items():
        assert entry["md5OfMessageBody"] == expected["md5OfBody"][entry_id]
    assert successful["third"]["md5OfMessageAttributes"] == expected["md5OfMessageAttributes"]["third"]
    [failed] = result["failed"]
    assert failed["id"] == "invalid"
    assert failed["code"] == "InvalidMessageContents"
    assert failed["senderFault"] is True
    assert "Invalid characters" in failed["message"]
    # and only the good entries were enqueued
    assert sorted(result["receivedBodies"]) == ["first body", "third body"]


def test_missing_queue_raises_the_typed_queue_does_not_exist_error(scenarios: NodeScenarios, stack: Stack) -> None:
    # given a queue name that no queue has
    name = _name("js-missing")
    # when the SDK looks it up and sends to the URL it would have
    result = scenarios.run("missing_queue.mjs", name, f"{stack.endpoint}/{DEV_ACCOUNT}/{name}")

    # then both calls raise the SDK's QueueDoesNotExist exception with HTTP 400, a client fault
    for call in ("getQueueUrl", "sendMessage"):
        error = result[call]
        assert error is not None, f"{call} on a missing queue succeeded"
        assert error["name"] == "QueueDoesNotExist", error
        assert error["isQueueDoesNotExist"] is True, error
        assert error["httpStatusCode"] == 400, error
        assert error["fault"] == "client", error
        # JSON answers carry the query protocol's code too (x-amzn-query-error), which the SDK exposes as Code.
        assert error["code"] == "AWS.SimpleQueueService.NonExistentQueue", error


# --- dead-letter queues and message move tasks --------------------------------------------------------


@pytest.fixture(scope="module")
def dead_letter_run(scenarios: NodeScenarios) -> dict[str, Any]:
    """One redrive scenario, asserted on by the tests below: a source with maxReceiveCount 1 and its DLQ."""
    return scenarios.run("dead_letter.mjs", _name("js-source"), _name("js-dlq"))


def test_message_received_too_often_is_moved_to_the_dead_letter_queue(dead_letter_run: dict[str, Any]) -> None:
    # given a source queue whose RedrivePolicy names the DLQ with maxReceiveCount 1
    result = dead_letter_run
    assert json.loads(result["redrivePolicy"]) == {
        "deadLetterTargetArn": result["deadLetterArn"],
        "maxReceiveCount": 1,
    }
    # when a message was received once, not deleted, and its one-second visibility ran out
    [first] = result["firstReceive"]
    assert first["messageId"] == result["sent"]["messageId"]
    # then the source never hands it out again, and it is in the DLQ with where it came from
    assert result["sourceAfterExpiry"] == []
    [dead] = result["deadLettered"]
    assert dead["body"] == result["sent"]["body"]
    assert dead["messageAttributes"] == first["messageAttributes"]
    assert dead["attributes"]["DeadLetterQueueSourceArn"] == result["sourceArn"]


def test_list_dead_letter_source_queues_names_the_source(dead_letter_run: dict[str, Any]) -> None:
    # given the DLQ of the redrive scenario, when ListDeadLetterSourceQueues asks for its sources
    listed = dead_letter_run["deadLetterSourceQueues"]
    # then the one source queue is listed
    assert "error" not in listed, listed
    assert listed["value"] == [dead_letter_run["sourceUrl"]]


def test_message_move_task_returns_messages_to_the_source(scenarios: NodeScenarios) -> None:
    # given three messages in a DLQ, when a move task takes them back to the source queue
    result = scenarios.run("move_task.mjs", _name("js-source"), _name("js-dlq"))

    # then the task was started, ran to COMPLETED and says it moved all three
    assert result["taskHandle"]
    assert result["statusesSeen"], "ListMessageMoveTasks never listed the task"
    assert result["statusesSeen"][-1] == "COMPLETED", result["statusesSeen"]
    task = result["finalTask"]
    assert task["sourceArn"] == result["deadLetterArn"]
    assert task["destinationArn"] == result["sourceArn"]
    assert task["approximateNumberOfMessagesMoved"] == len(result["sentBodies"])
    assert task["failureReason"] is None
    # and the messages are in the source queue and no longer in the DLQ
    assert sorted(result["inSource"]) == sorted(result["sentBodies"])
    assert result["leftInDeadLetter"] == []
    # and the finished task stays listed
    listed = result["tasksListedAfterwards"]
    assert "error" not in listed, listed
    assert [t["status"] for t in listed["value"]][:1] == ["COMPLETED"]


# --- FIFO queues --------------------------------------------------------------------------------------


def test_fifo_keeps_group_order_and_drops_a_repeated_body(scenarios: NodeScenarios) -> None:
    # given a FIFO queue with content-based deduplication
    # when five messages go to two groups, interleaved, then the first body is sent again
    result = scenarios.run("fifo.mjs", _name("js-fifo") + ".fifo")

    # then every send returned a sequence number, increasing within each group in send order
    sent = result["sent"]
    assert all((m["sequenceNumber"] or "").isdigit() for m in sent), sent
    for group in ("group-a", "group-b"):
        numbers = [int(m["sequenceNumber"]) for m in sent if m["group"] == group]
        assert numbers == sorted(set(numbers)), (group, numbers)
    assert len({message["messageId"] for message in sent}) == len(sent)
    # and each group was received in the order it was sent
    received = [message for batch in result["receives"] for message in batch]
    for group in ("group-a", "group-b"):
        assert [m["body"] for m in received if m["group"] == group] == [
            m["body"] for m in sent if m["group"] == group
        ]
    # and each message carries the sequence number its send returned and its content-based deduplication id
    by_body = {message["body"]: message for message in sent}
    for message in received:
        assert message["messageId"] == by_body[message["body"]]["messageId"]
        assert message["sequenceNumber"] == by_body[message["body"]]["sequenceNumber"]
        assert message["deduplicationId"] == hashlib.sha256(message["body"].encode()).hexdigest()
    # and the repeated body was accepted but delivered only once
    assert result["duplicate"]["messageId"]
    assert sorted(m["body"] for m in received) == sorted(m["body"] for m in sent)
    assert result["afterDrain"] == []
