"""The offline deploy lane (``make deploy-local``, :mod:`ferrymq.infra.deploy_local`), as a user runs it.

template.yaml goes into MiniStack through its CloudFormation API; the storage workers run as processes
against the tables it created; SQS clients (boto3 on both protocols, the AWS CLI) send, receive and delete
through API Gateway's REST API and the deployed function, which verifies SigV4; killing a worker leaves
sends working.  The function's code package and layer are built by the Makefile's targets, the layer's
third-party part linked from this environment (the lane itself builds them with ``sam build``'s targets,
which download the Lambda platform's wheels).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ferrymq.infra.deploy_local import MiniStack
from tests.support.bundles import link_third_party, requirement_closure
from tests.support.ports import consecutive_free_ports
from tests.support.processes import group_members, terminate_group
from tests.support.sqs_clients import sqs_client

REPO = Path(__file__).resolve().parents[2]
MINISTACK = REPO / ".cache" / "ministack" / "bin" / "ministack"
START_SECONDS = 300


class Lane:
    def __init__(self, process: subprocess.Popen[str], endpoint: str, up_pid: int) -> None:
        self.process = process
        self.endpoint = endpoint
        self.up_pid = up_pid

    def worker_pids(self) -> dict[str, int]:
        return {argv[argv.index("--worker-id") + 1]: pid for pid, argv in group_members(self.up_pid).items()
                if "ferrymq.storage" in argv and "--worker-id" in argv}


@pytest.fixture(scope="module")
def lane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lane]:
    if not MINISTACK.exists():
        pytest.fail(f"MiniStack is not installed: run `make test` or `make deploy-local` (it goes to {MINISTACK})")
    build = tmp_path_factory.mktemp("deploy-build")
    for target, path in (("build-FrontendFunction", build / "function"), ("layer-library", build / "layer")):
        subprocess.run(["make", "-s", target, f"ARTIFACTS_DIR={path}"], cwd=REPO, check=True, timeout=120)
    link_third_party(requirement_closure(REPO / "layers/ferrymq/requirements.txt"), build / "layer" / "python")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    process = subprocess.Popen(
        [sys.executable, "-m", "ferrymq.infra.deploy_local", "--ministack", str(MINISTACK),
         "--function-dir", str(build / "function"), "--layer-dir", str(build / "layer"),
         "--data-dir", str(tmp_path_factory.mktemp("deploy-local"))],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        endpoint, up_pid, seen = None, 0, []
        deadline = time.monotonic() + START_SECONDS
        assert process.stdout is not None
        while endpoint is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                pytest.fail(f"the lane stopped before deploying: {''.join(seen[-20:])}")
            seen.append(line)
            if found := re.search(r"ferrymq up, pid (\d+)", line):
                up_pid = int(found.group(1))
            if line.startswith("FERRYMQ_DEPLOYED endpoint="):
                endpoint = line.split("=", 1)[1].strip()
        assert endpoint and up_pid, "".join(seen[-20:])
        yield Lane(process, endpoint, up_pid)
    finally:
        # SIGTERM: the lane stops the workers, the front and MiniStack itself.
        terminate_group(process, 30)


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_boto3_sends_receives_and_deletes_through_api_gateway_and_the_function(lane: Lane, protocol: str) -> None:
    sqs = sqs_client(lane.endpoint, protocol)
    url = sqs.create_queue(QueueName=f"deployed-{protocol}")["QueueUrl"]
    # Queue URLs route back through the API's stage.
    assert url.startswith(lane.endpoint)
    sent = sqs.send_message(QueueUrl=url, MessageBody="through the deployed function")
    (message,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)["Messages"]
    assert (message["MessageId"], message["Body"]) == (sent["MessageId"], "through the deployed function")
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)


def test_a_wrong_signature_is_refused(lane: Lane) -> None:
    with pytest.raises(ClientError) as refused:
        sqs_client(lane.endpoint, "json", secret_key="not-the-secret").list_queues()
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_the_aws_cli_sends_and_receives(lane: Lane) -> None:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_DEFAULT_REGION": "us-east-1"}
    env = {k: v for k, v in env.items() if not k.startswith("AWS_ENDPOINT_URL")}
    aws = [str(Path(sys.executable).with_name("aws")), "--endpoint-url", lane.endpoint, "--output", "json", "sqs"]

    def run(*args: str) -> Any:
        import json

        done = subprocess.run([*aws, *args], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else {}

    url = run("create-queue", "--queue-name", "deployed-cli")["QueueUrl"]
    run("send-message", "--queue-url", url, "--message-body", "from the cli")
    (message,) = run("receive-message", "--queue-url", url, "--wait-time-seconds", "2")["Messages"]
    assert message["Body"] == "from the cli"
    run("delete-message", "--queue-url", url, "--receipt-handle", message["ReceiptHandle"])


def test_sends_succeed_with_one_worker_killed(lane: Lane) -> None:
    sqs = sqs_client(lane.endpoint, "json", retries={"total_max_attempts": 10, "mode": "standard"})
    url = sqs.create_queue(QueueName="deployed-failover")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="before")
    # when a worker (worker-0, the preferred leader of partition 0) dies without a word
    os.kill(lane.worker_pids()["worker-0"], signal.SIGKILL)
    # then sends go on (the SDK's retries cover the failover), and nothing acknowledged is lost
    bodies = {"before"}
    for i in range(5):
        sqs.send_message(QueueUrl=url, MessageBody=f"after-{i}")
        bodies.add(f"after-{i}")
    received: set[str] = set()
    deadline = time.monotonic() + 60
    while received != bodies:
        assert time.monotonic() < deadline, f"missing {bodies - received}"
        for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
                "Messages", []):
            received.add(message["Body"])
    assert received == bodies


def test_the_makefiles_relative_command_for_ministack_starts_it(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # `make deploy-local` names MiniStack as .cache/ministack/bin/ministack, from the repository's root.
    if not MINISTACK.exists():
        pytest.fail(f"MiniStack is not installed: run `make test` or `make deploy-local` (it goes to {MINISTACK})")
    monkeypatch.chdir(REPO)
    emulator = MiniStack(str(MINISTACK.relative_to(REPO)), consecutive_free_ports(1), tmp_path / "ministack")
    try:
        emulator.wait_ready()
        assert emulator.client("s3").list_buckets()["Buckets"] == []
    finally:
        emulator.stop()
