"""Celery on FerryMQ: kombu's SQS transport carries real tasks to a real worker process.

The test process sends tasks by name; a ``celery worker -P solo`` process runs them
(``tests/e2e/celery_app/tasks.py``), and each task writes its result to a file the test reads, so no
result backend is involved. One task sends more tasks from inside the worker and one is retried, so the
worker publishes through FerryMQ too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.celery_app.app import broker_url, create_app
from tests.e2e.conftest import Stack
from tests.support.processes import terminate_group
from tests.support.sqs_clients import sqs_client

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0
DRAIN_TIMEOUT = 15.0
# An account of its own: the worker lists queues on start, and sees only this test's.
CELERY_ACCOUNT = "313131313131"


class Worker:
    """A ``celery worker`` process in its own process group, logging to a file."""

    def __init__(self, env: dict[str, str], queue: str, log_path: Path) -> None:
        self.log_path = log_path
        self._env = env
        self._queue = queue
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [
            sys.executable, "-m", "celery", "-A", "tests.e2e.celery_app.tasks", "worker",
            "-P", "solo", "-Q", self._queue, "-n", f"{self._queue}@%h", "--loglevel", "INFO",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                command, cwd=REPO_ROOT, env=self._env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        assert self._process is not None, "the worker was not started"
        return self._process.pid

    def exit_code(self) -> int | None:
        return None if self._process is None else self._process.poll()

    def stop(self) -> None:
        """Warm shutdown (SIGTERM); SIGKILL to the group if it does not finish in time."""
        if self._process is None:
            return
        terminate_group(self._process, STOP_TIMEOUT)
        self._process = None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@pytest.fixture
def celery_key(stack: Stack) -> tuple[str, str]:
    """(access key id, secret access key) of a key made for this test."""
    return stack.create_credentials(CELERY_ACCOUNT, f"celery-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def celery_broker_url(stack: Stack, celery_key: tuple[str, str]) -> str:
    endpoint = urlsplit(stack.endpoint)
    assert endpoint.hostname and endpoint.port, stack.endpoint
    return broker_url(endpoint.hostname, endpoint.port, *celery_key)


@pytest.fixture
def queue_name() -> str:
    return f"celery-e2e-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def output_dir(tmp_path: Path) -> Path:
    path = tmp_path / "results"
    path.mkdir()
    return path


@pytest.fixture
def worker(stack: Stack, celery_broker_url: str, queue_name: str, output_dir: Path, tmp_path: Path) -> Iterator[Worker]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        {
            "FERRYMQ_CELERY_BROKER_URL": celery_broker_url,
            "FERRYMQ_CELERY_REGION": stack.region,
            "FERRYMQ_CELERY_QUEUE": queue_name,
            "FERRYMQ_CELERY_OUTPUT": str(output_dir),
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "PYTHONUNBUFFERED": "1",
        }
    )
    running = Worker(env, queue_name, tmp_path / "worker.log")
    try:
        running.start()
        yield running
    finally:
        running.stop()


def _wait_for_results(output_dir: Path, tags: set[str], worker: Worker) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + RESULTS_TIMEOUT
    while True:
        done = {path.stem for path in output_dir.glob("*.json")}
        if tags <= done:
            return {tag: json.loads((output_dir / f"{tag}.json").read_text()) for tag in tags}
        code = worker.exit_code()
        if code is not None or time.monotonic() >= deadline:
            reason = f"the worker exited with {code}" if code is not None else f"{RESULTS_TIMEOUT:.0f} s passed"
            pytest.fail(
                f"{reason} before tasks {sorted(tags - done)} reported; worker log:\n{worker.log_tail()}"
            )
        time.sleep(0.1)


def _wait_until_drained(sqs: Any, queue_name: str) -> dict[str, str]:
    """The queue's message counts, once nothing is left in it or the wait runs out."""
    url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
    names = [f"ApproximateNumberOf{kind}" for kind in ("Messages", "MessagesNotVisible", "MessagesDelayed")]
    deadline = time.monotonic() + DRAIN_TIMEOUT
    while True:
        counts = dict(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"])
        if set(counts.values()) == {"0"} or time.monotonic() >= deadline:
            return counts
        time.sleep(0.2)


def test_worker_runs_tasks_sent_through_ferrymq(
    stack: Stack, celery_key: tuple[str, str], celery_broker_url: str, queue_name: str, output_dir: Path,
    worker: Worker,
) -> None:
    # given a worker consuming a queue of its own, and a producer app on the same broker
    producer = create_app(celery_broker_url, stack.region, queue_name)
    text = "ferry über the river \U0001f6a2"
    try:
        # when tasks are sent by name: plain ones, one that sends more tasks, and one that is retried
        sent = [
            producer.send_task("ferrymq_e2e.add", args=(2, 3), kwargs={"tag": "add"}),
            producer.send_task("ferrymq_e2e.word_lengths", args=(text,), kwargs={"tag": "words"}),
            producer.send_task("ferrymq_e2e.fan_out", args=(3,), kwargs={"tag": "fan"}),
            producer.send_task("ferrymq_e2e.retry_once", kwargs={"tag": "retried"}),
        ]
    finally:
        producer.close()

    # then every task, and every task the worker sent itself, ran in the worker process
    results = _wait_for_results(output_dir, {"add", "words", "fan", "fan-0", "fan-1", "fan-2", "retried"}, worker)
    assert results["add"]["result"] == 5
    assert results["words"]["result"] == {word: len(word) for word in text.split()}
    assert results["fan"]["result"] == 3
    assert [results[f"fan-{i}"]["result"] for i in range(3)] == [0, 2, 4]
    assert results["retried"]["result"] == 1
    # and each ran as the task that was sent, in the worker process
    assert [results[tag]["task_id"] for tag in ("add", "words", "fan", "retried")] == [r.id for r in sent]
    assert {r["worker_pid"] for r in results.values()} == {worker.pid}
    # and the worker acknowledged every message, so the queue is empty
    sqs = sqs_client(stack.endpoint, "json", access_key=celery_key[0], secret_key=celery_key[1], region=stack.region)
    counts = _wait_until_drained(sqs, queue_name)
    assert set(counts.values()) == {"0"}, counts
    # and the worker is still running: nothing above made it fail
    assert worker.exit_code() is None, worker.log_tail()
