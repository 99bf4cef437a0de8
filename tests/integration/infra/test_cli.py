"""The ``ferrymq`` command as users run it: admin commands, ``up`` start-up, shutdown and failure handling."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from ferrymq.infra import declared_queues
from ferrymq.infra.local_stack import PUSH_HOSTS, READY_PREFIX
from ferrymq.infra.standin import layout
from ferrymq.storage.log.lock import locked
from tests.integration.infra.processes import child_env, children_of, is_alive, running
from tests.support.ports import consecutive_free_ports
from tests.support.waiting import wait_for

FERRYMQ = [sys.executable, "-m", "ferrymq.infra.cli"]


def _ferrymq(data_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FERRYMQ, *args], env=child_env(FERRYMQ_DATA_DIR=str(data_dir), **env),
                          capture_output=True, text=True, timeout=120)


def _up(data_dir: Path, stderr: Any = None, **env: str) -> Any:
    environment = child_env(FERRYMQ_DATA_DIR=str(data_dir), FERRYMQ_PORT="0", **env)
    return running([*FERRYMQ, "up"], READY_PREFIX, environment, new_session=True, stderr=stderr)


def test_credentials_commands_work_without_a_running_stack(tmp_path: Path) -> None:
    # given no running stack, when a key is created
    created = _ferrymq(tmp_path, "credentials", "create", "--account", "111122223333", "--user", "alice", "--json")
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)
    assert key["AccountId"] == "111122223333"
    assert key["UserName"] == "alice"
    assert key["SecretAccessKey"]
    # then a later command, in a new process, lists it without its secret
    listed = _ferrymq(tmp_path, "credentials", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(k["AccessKeyId"], "SecretAccessKey" in k) for k in json.loads(listed.stdout)] == [
        (key["AccessKeyId"], False)
    ]
    # and deleting it succeeds once, then reports that the key is gone
    assert _ferrymq(tmp_path, "credentials", "delete", key["AccessKeyId"]).returncode == 0
    again = _ferrymq(tmp_path, "credentials", "delete", key["AccessKeyId"])
    assert again.returncode == 1
    assert "no access key" in again.stderr
    # and no stand-in is left running on the data directory
    assert not layout.is_locked(tmp_path / "aws")


def test_up_serves_then_stops_every_child_on_sigterm(tmp_path: Path) -> None:
    # given a running stack
    with _up(tmp_path) as up:
        children = children_of(up.process.pid)
        assert len(children) == 5 + PUSH_HOSTS  # stand-in, three workers, gateway, push hosts
        endpoint_file = tmp_path / "aws" / layout.ENDPOINT_FILE
        assert endpoint_file.exists()
        # when an admin command runs meanwhile, then it uses the stack's own stand-in
        created = _ferrymq(tmp_path, "credentials", "create", "--account", "222233334444", "--user", "bo", "--json")
        assert created.returncode == 0, created.stderr
        sqs = boto3.client("sqs", endpoint_url=up.url, region_name="us-east-1", aws_access_key_id="test",
                           aws_secret_access_key="test")
        assert sqs.list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200
        # when `up` gets SIGTERM
        status = up.terminate()
    # then it exits 0, every child is gone and the endpoint file is removed
    assert status == 0
    assert [pid for pid in children if is_alive(pid)] == []
    assert not endpoint_file.exists()


def test_up_stops_the_stack_when_a_child_dies(tmp_path: Path) -> None:
    # given a running stack
    stderr_path = tmp_path / "up.stderr"
    with stderr_path.open("w") as stderr, _up(tmp_path, stderr=stderr) as up:
        children = children_of(up.process.pid)
        gateway = next(pid for pid in children if "ferrymq.infra.gateway" in _command_line(pid))
        # when its gateway is killed
        subprocess.run(["kill", "-KILL", str(gateway)], check=True)
        status = up.process.wait(60)
    # then `up` reports it, stops the others and exits non-zero
    assert status == 1
    assert "gateway" in stderr_path.read_text()
    assert "exited unexpectedly" in stderr_path.read_text()
    assert [pid for pid in children if is_alive(pid)] == []


def _command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def _own_lines(stderr_path: Path, prefix: str) -> list[str]:
    """``up``'s own lines starting with ``prefix`` (its children's log lines are JSON)."""
    return [line for line in stderr_path.read_text().splitlines() if line.startswith(prefix)]


def test_a_worker_that_cannot_start_is_retried_with_backoff_while_the_stack_serves(tmp_path: Path) -> None:
    # given worker-1's directory held by another process, so that worker-1 refuses to start
    held = tmp_path / "workers" / "worker-1"
    held.mkdir(parents=True)
    stderr_path = tmp_path / "up.stderr"
    with stderr_path.open("w") as stderr, contextlib.ExitStack() as holding:
        holding.enter_context(locked(held))
        with _up(tmp_path, stderr=stderr) as up:
            # then the stack is ready on the two others, and its banner names the failing worker and why
            failing = [line for line in up.output if line.startswith("  failing ")]
            assert len(failing) == 1, up.output
            assert failing[0].startswith("  failing          worker-1: failed to start: exited with status 1 (")
            assert f"{held} is in use (is a storage worker running on it?)" in failing[0]
            # and boto3 sends and receives through it
            sqs = boto3.client("sqs", endpoint_url=up.url, region_name="us-east-1", aws_access_key_id="test",
                               aws_secret_access_key="test")
            url = sqs.create_queue(QueueName="two-of-three")["QueueUrl"]
            sent = {sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")["MessageId"] for i in range(5)}
            received: set[str] = set()
            for _ in range(10):
                for message in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                                   WaitTimeSeconds=1).get("Messages", []):
                    received.add(message["MessageId"])
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
                if received == sent:
                    break
            assert received == sent
            # and `up` keeps starting worker-1 again, each time after a longer wait, one line each with its error
            def three_tries() -> list[str]:
                found = _own_lines(stderr_path, "ferrymq: worker-1 ")
                return found if len(found) >= 3 else []

            tries = wait_for(three_tries, timeout=60)
            assert all(" failed to start: exited with status 1 (" in line and "is in use" in line for line in tries)
            assert [line.rsplit("next try in ", 1)[1] for line in tries[:3]] == ["0.5 s", "1.0 s", "2.0 s"]
            # when the directory is free again, then worker-1 comes back and the cluster has all three
            holding.close()
            wait_for(lambda: _own_lines(stderr_path, "ferrymq: worker-1 is back"), timeout=60)
            status = json.loads(_ferrymq(tmp_path, "cluster", "status", "--json").stdout)
            assert sorted(w["worker_id"] for w in status["workers"] if w["alive"]) == [
                "worker-0", "worker-1", "worker-2"]
            assert up.process.poll() is None


def test_standin_and_gateway_stop_when_up_dies_alone(tmp_path: Path) -> None:
    # given a running stack
    with _up(tmp_path) as up:
        children = children_of(up.process.pid)
        standin = children[0]
        gateway = next(pid for pid in children if "ferrymq.infra.gateway" in _command_line(pid))
        # when only `up` is killed with SIGKILL
        up.kill9()
        # then its stand-in and gateway notice and exit, releasing the stand-in's data directory
        deadline = time.monotonic() + 30
        while (is_alive(standin) or is_alive(gateway)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not is_alive(standin)
        assert not is_alive(gateway)
        assert not layout.is_locked(tmp_path / "aws")


def test_up_with_a_named_endpoint_starts_no_standin(tmp_path: Path, aws_endpoint: str) -> None:
    # given AWS_ENDPOINT_URL naming an endpoint
    with _up(tmp_path, AWS_ENDPOINT_URL=aws_endpoint, FERRYMQ_TABLE_PREFIX="ferrymq-cli-",
             FERRYMQ_USAGE_BUCKET="ferrymq-cli-usage") as up:
        # then the stack runs without a stand-in of its own: only a worker and the gateway
        assert len(children_of(up.process.pid)) == 4 + PUSH_HOSTS  # three workers, the gateway, the push hosts
        assert not (tmp_path / "aws" / layout.LOCK_FILE).exists()
        assert aws_endpoint in "".join(up.output)
        # and its resources were bootstrapped at that endpoint
        tables = boto3.client("dynamodb", endpoint_url=aws_endpoint, region_name="us-east-1").list_tables()
        assert "ferrymq-cli-queues" in tables["TableNames"]
        up.process.send_signal(signal.SIGINT)
        assert up.process.wait(30) == 0


def test_cluster_init_lays_out_replica_sets_and_status_shows_them_without_a_running_stack(tmp_path: Path) -> None:
    # given no running stack, when the cluster is initialised for four workers and four partitions
    made = _ferrymq(tmp_path, "cluster", "init", FERRYMQ_WORKERS="4", FERRYMQ_PARTITIONS="4")
    assert made.returncode == 0, made.stderr
    # then each partition has three replicas, its preferred leader first, each worker preferred once
    lines = made.stdout.splitlines()
    assert lines[0] == "cluster local partition 0: replicas worker-0,worker-1,worker-2, acks majority"
    assert lines[3] == "cluster local partition 3: replicas worker-3,worker-0,worker-1, acks majority"
    # and running it again changes nothing, even with another shape (a cluster is laid out once)
    again = _ferrymq(tmp_path, "cluster", "init", FERRYMQ_WORKERS="3", FERRYMQ_PARTITIONS="4")
    assert again.stdout == made.stdout
    # and the status shows the partitions, with no worker alive yet
    status = _ferrymq(tmp_path, "cluster", "status", "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert [p["replicas"][0] for p in report["partitions"]] == ["worker-0", "worker-1", "worker-2", "worker-3"]
    assert report["workers"] == []


def test_up_refuses_a_replication_factor_above_the_workers(tmp_path: Path) -> None:
    refused = _ferrymq(tmp_path, "up", FERRYMQ_WORKERS="2", FERRYMQ_REPLICATION_FACTOR="3", FERRYMQ_PORT="0")
    assert refused.returncode == 1
    assert "FERRYMQ_REPLICATION_FACTOR (3) must be between 1 and FERRYMQ_WORKERS (2)" in refused.stderr


@pytest.mark.parametrize("variable", ["FERRYMQ_WORKER_CHECKPOINT_BYTES", "FERRYMQ_WORKER_CHECKPOINT_MAX_BYTES",
                                      "FERRYMQ_WORKER_CHECKPOINT_RECORDS", "FERRYMQ_WORKER_SEGMENT_BYTES"])
def test_up_refuses_a_worker_setting_no_worker_would_start_with_before_starting_anything(
    tmp_path: Path, variable: str
) -> None:
    # when `up` is given a negative interval (every worker would exit at once, and be started again and again)
    refused = _ferrymq(tmp_path, "up", FERRYMQ_PORT="0", **{variable: "-1"})
    # then it refuses at once, naming the setting, and starts no child (no stand-in state)
    assert refused.returncode == 1
    assert variable in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "aws").exists()


@pytest.mark.parametrize("command", [("up",), ("credentials", "list"), ("cluster", "status")])
def test_a_setting_that_is_not_a_number_is_named_in_one_line(tmp_path: Path, command: tuple[str, ...]) -> None:
    refused = _ferrymq(tmp_path, *command, FERRYMQ_WORKER_CHECKPOINT_MAX_BYTES="lots")
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "ferrymq: FERRYMQ_WORKER_CHECKPOINT_MAX_BYTES: invalid literal for int() with base 10: 'lots'"
    )


def test_up_on_a_port_in_use_says_so_before_starting_anything(tmp_path: Path) -> None:
    # given something listening on the port `up` is told to use
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        # when `up` starts, then it refuses at once with what to do, and starts no child (no stand-in state)
        refused = _ferrymq(tmp_path, "up", FERRYMQ_PORT=str(port))
    assert refused.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in refused.stderr
    assert "FERRYMQ_PORT" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "aws").exists()


def test_up_refuses_a_certificate_without_its_key_before_starting_anything(tmp_path: Path) -> None:
    refused = _ferrymq(tmp_path, "up", FERRYMQ_PORT="0", FERRYMQ_TLS_CERT_FILE=str(tmp_path / "cert.pem"))
    assert refused.returncode == 1
    assert "FERRYMQ_TLS_CERT_FILE and FERRYMQ_TLS_KEY_FILE must be given together" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "aws").exists()


@pytest.mark.parametrize("value", ["0", "65", "many"])
def test_up_refuses_a_number_of_gateway_processes_it_would_not_start(tmp_path: Path, value: str) -> None:
    refused = _ferrymq(tmp_path, "up", FERRYMQ_PORT="0", FERRYMQ_GATEWAY_PROCESSES=value)
    assert refused.returncode == 2
    assert refused.stderr.startswith("ferrymq: FERRYMQ_GATEWAY_PROCESSES: ") and "Traceback" not in refused.stderr
    assert not (tmp_path / "aws").exists()


def test_version() -> None:
    shown = subprocess.run([*FERRYMQ, "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert shown.stdout.strip() == f"ferrymq {importlib.metadata.version('ferrymq')}"


QUEUES_FILE = """
queues:
  jobs:
    attributes:
      VisibilityTimeout: 60
    deadLetterQueue: {name: jobs-dlq, maxReceiveCount: 3}
    tags: {team: billing}
  jobs-dlq: {}
  orders.fifo:
    attributes: {ContentBasedDeduplication: true}
"""


def _queues(sqs: Any) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """Every queue's attributes (timestamps included: a queue changed again would show it) and tags."""
    out = {}
    for url in sqs.list_queues().get("QueueUrls", []):
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        out[url.rsplit("/", 1)[1]] = (attributes, sqs.list_queue_tags(QueueUrl=url).get("Tags", {}))
    return out


def test_up_with_every_port_fixed_and_declared_queues_applied_on_each_start(tmp_path: Path) -> None:
    # given fixed ports for the gateway, the stand-in, and the three workers' client and admin ports
    base = consecutive_free_ports(8)
    ports = {"FERRYMQ_PORT": base, "FERRYMQ_STANDIN_PORT": base + 1, "FERRYMQ_WORKER_PORT": base + 2,
             "FERRYMQ_WORKER_ADMIN_PORT": base + 5}
    queues_file = tmp_path / "queues.yaml"
    queues_file.write_text(QUEUES_FILE)
    data_dir = tmp_path / "data"
    env = child_env(FERRYMQ_DATA_DIR=str(data_dir), **{k: str(v) for k, v in ports.items()})
    seen = []
    # when up starts twice, once with --queues and once with FERRYMQ_QUEUES_FILE
    starts = ((["up", "--queues", str(queues_file)], {}), (["up"], {"FERRYMQ_QUEUES_FILE": str(queues_file)}))
    for argv, extra in starts:
        with running([*FERRYMQ, *argv], READY_PREFIX, {**env, **extra}, new_session=True) as up:
            # then everything listens where it was told to
            assert up.url == f"http://127.0.0.1:{base}"
            assert (data_dir / "aws" / layout.ENDPOINT_FILE).read_text().strip() == f"http://127.0.0.1:{base + 1}"
            status = json.loads(_ferrymq(data_dir, "cluster", "status", "--json").stdout)
            assert sorted(w["address"] for w in status["workers"]) == [f"127.0.0.1:{base + 2 + i}" for i in range(3)]
            assert sorted(w["admin"] for w in status["workers"]) == [f"127.0.0.1:{base + 5 + i}" for i in range(3)]
            # and the declared queues are there once it is ready
            sqs = boto3.client("sqs", endpoint_url=up.url, region_name="us-east-1", aws_access_key_id="test",
                               aws_secret_access_key="test")
            seen.append(_queues(sqs))
            if len(seen) == 2:
                _changed_by_hand_then_applied_again(sqs, queues_file)
    first, second = seen
    assert sorted(first) == ["jobs", "jobs-dlq", "orders.fifo"]
    jobs, tags = first["jobs"]
    assert jobs["VisibilityTimeout"] == "60" and tags == {"team": "billing"}
    assert json.loads(jobs["RedrivePolicy"]) == {"deadLetterTargetArn": first["jobs-dlq"][0]["QueueArn"],
                                                 "maxReceiveCount": 3}
    assert (first["orders.fifo"][0]["FifoQueue"], first["orders.fifo"][0]["ContentBasedDeduplication"]) == (
        "true", "true")
    # and applying the same file again changed nothing, not even a queue's last-modified time
    assert second == first


def _changed_by_hand_then_applied_again(sqs: Any, queues_file: Path) -> None:
    # given a declared queue changed by hand since start-up
    url = sqs.get_queue_url(QueueName="jobs")["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "5", "DelaySeconds": "7"})
    sqs.tag_queue(QueueUrl=url, Tags={"team": "other", "extra": "kept"})
    before = _queues(sqs)
    # when the file is applied again
    applied = declared_queues.apply(sqs, declared_queues.load(queues_file, region="us-east-1", account="000000000000"))
    # then only that queue is updated: declared values back, undeclared ones kept
    assert (applied.created, applied.updated, sorted(applied.unchanged)) == ([], ["jobs"], ["jobs-dlq", "orders.fifo"])
    after = _queues(sqs)
    assert (after["jobs"][0]["VisibilityTimeout"], after["jobs"][0]["DelaySeconds"]) == ("60", "7")
    assert after["jobs"][1] == {"team": "billing", "extra": "kept"}
    assert {k: after[k] for k in ("jobs-dlq", "orders.fifo")} == {k: before[k] for k in ("jobs-dlq", "orders.fifo")}


@pytest.mark.parametrize(("content", "words"), [
    ("queues:\n  jobs:\n    attributes: {VisibilityTimeout: 43201}\n",
     "queue 'jobs': InvalidAttributeValue: Invalid value for the parameter VisibilityTimeout."),
    ("queues:\n  jobs:\n    deadLetterQueue: {name: gone, maxReceiveCount: 3}\n",
     "queue 'jobs': its dead-letter queue 'gone' is not declared in the file"),
    (None, "No such file or directory"),
])
def test_a_bad_queues_file_is_refused_in_one_line_before_anything_starts(tmp_path: Path, content: str | None,
                                                                        words: str) -> None:
    queues_file = tmp_path / "queues.yaml"
    if content is not None:
        queues_file.write_text(content)
    refused = _ferrymq(tmp_path / "data", "up", "--queues", str(queues_file))
    assert refused.returncode == 1
    lines = refused.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ferrymq: queues file {queues_file}: "), refused.stderr
    assert words in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "aws").exists()


def test_up_on_a_taken_stand_in_port_says_so_before_starting_anything(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        refused = _ferrymq(tmp_path, "up", FERRYMQ_STANDIN_PORT=str(port))
    assert refused.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in refused.stderr and "FERRYMQ_STANDIN_PORT" in refused.stderr
    assert not (tmp_path / "aws").exists()


def test_up_refuses_fixed_worker_and_admin_ports_that_overlap(tmp_path: Path) -> None:
    # given admin ports that would run into the workers' RPC ports (3 workers take 40000-40002)
    refused = _ferrymq(tmp_path, "up", FERRYMQ_WORKER_PORT="40000", FERRYMQ_WORKER_ADMIN_PORT="40002")
    # then `up` refuses before starting anything, naming both
    assert refused.returncode == 1
    assert "FERRYMQ_WORKER_PORT (40000-40002) and FERRYMQ_WORKER_ADMIN_PORT (40002-40004) overlap" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "aws").exists()


@pytest.mark.parametrize("package", ["pyspark", "pyarrow"])
def test_spark_without_its_packages_says_what_to_install_in_one_line(tmp_path: Path, package: str) -> None:
    # given an interpreter that cannot import one of the `spark` extra's packages (as after `make up`)
    blocked = f"import sys; sys.modules[{package!r}] = None; from ferrymq.infra.cli import main; sys.exit(main())"
    # when a Spark job is asked for
    ran = subprocess.run([sys.executable, "-c", blocked, "spark", "billing", "--date", "2026-11-21"],
                         env=child_env(FERRYMQ_DATA_DIR=str(tmp_path)), capture_output=True, text=True, timeout=120)
    # then it says in one line what is missing and how to install it, exits 1, and started nothing
    assert ran.returncode == 1
    assert ran.stderr.splitlines() == [
        f"ferrymq: the Spark jobs need {package}, which are not installed: pip install 'ferrymq[spark]' "
        "(in a checkout: make install-spark)"
    ]
    assert not (tmp_path / "aws").exists()


def test_a_second_up_on_the_same_data_dir_is_refused_and_leaves_the_running_stack_alone(tmp_path: Path) -> None:
    # given a running stack
    with _up(tmp_path) as up:
        port = up.url.rsplit(":", 1)[1]
        gateway_file, standin_file = tmp_path / "gateway.json", tmp_path / "aws" / layout.ENDPOINT_FILE
        recorded = gateway_file.read_text(), standin_file.read_text()
        # when `up` runs again on its data directory, on its port (`make up` twice) and on any free one
        for again_port in (port, "0"):
            again = _ferrymq(tmp_path, "up", FERRYMQ_PORT=again_port)
            # then it is refused in one line naming the running one, before it starts anything
            assert again.returncode == 1
            assert again.stderr.splitlines() == [
                f"ferrymq: another ferrymq up (pid {up.process.pid}) is running on {tmp_path}: stop it first, or "
                "give this one another FERRYMQ_DATA_DIR"
            ]
        # and the running stack's files are untouched, so the admin commands still find it
        assert (gateway_file.read_text(), standin_file.read_text()) == recorded
        status = _ferrymq(tmp_path, "cluster", "status", "--json")
        assert status.returncode == 0, status.stderr
        assert len(json.loads(status.stdout)["workers"]) == 3
        listed = _ferrymq(tmp_path, "queues", "list")
        assert listed.returncode == 0, listed.stderr
        assert up.process.poll() is None
