"""The whole stack, started exactly as a user starts it: ``ferrymq up`` in a subprocess.

``stack`` is one stack for the session; ``private_stack`` gives a test its own (for kill -9 and restart
tests). Each runs in its own process group with ``FERRYMQ_PORT=0`` and a fresh ``FERRYMQ_DATA_DIR``, and
is stopped in ``finally``. ``sqs`` is a boto3 SQS client for the session stack, once per wire protocol
(``protocol``: ``json`` or ``query``).

AWS resources come from the durable stand-in that ``ferrymq up`` starts, or from the endpoint named by
``FERRYMQ_TEST_AWS_ENDPOINT`` (LocalStack), with names unique to each stack.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.standin import layout
from tests.support.processes import kill_group, terminate_group
from tests.support.sqs_clients import sqs_client

READY_PREFIX = "FERRYMQ_READY"
START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0
# Variables of the developer's shell that would point the stack somewhere else.
_FOREIGN_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL", "FERRYMQ_AWS_ENDPOINT_URL")


def _ferrymq_command() -> list[str]:
    script = Path(sys.executable).with_name("ferrymq")
    return [str(script)] if script.exists() else [sys.executable, "-m", "infra.cli"]


def _stack_environment(data_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _FOREIGN_ENDPOINT_VARIABLES and not k.startswith("AWS_ENDPOINT_URL_")
    }
    env.update({"FERRYMQ_PORT": "0", "FERRYMQ_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"})
    external = os.environ.get("FERRYMQ_TEST_AWS_ENDPOINT")
    if external:
        # A shared endpoint: give each stack names of its own.
        token = uuid.uuid4().hex[:8]
        env.update(
            {
                "AWS_ENDPOINT_URL": external,
                "FERRYMQ_TABLE_PREFIX": f"ferrymq-e2e-{token}-",
                "FERRYMQ_USAGE_BUCKET": f"ferrymq-e2e-{token}",
                "AWS_ACCESS_KEY_ID": os.environ.get("AWS_ACCESS_KEY_ID", "test"),
                "AWS_SECRET_ACCESS_KEY": os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
                "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
            }
        )
    return env


class Stack:
    """A running ``ferrymq up`` and what a client needs to talk to it."""

    region = "us-east-1"
    access_key = "test"
    secret_key = "test"

    def __init__(self, data_dir: Path, extra_env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.env = {**_stack_environment(data_dir), **(extra_env or {})}
        self.endpoint = ""
        self.log_path = data_dir / "up.log"
        self._process: subprocess.Popen[str] | None = None

    # --- life cycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("a")
        try:
            # Its own process group: kill9_all reaches `up` and every child it started.
            self._process = subprocess.Popen(
                [*_ferrymq_command(), "up"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                start_new_session=True,
            )
        finally:
            log.close()
        self.endpoint = self._wait_for_ready(self._process)

    def _wait_for_ready(self, process: subprocess.Popen[str]) -> str:
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert process.stdout is not None
            with self.log_path.open("a") as log:
                for line in process.stdout:
                    log.write(line)
                    log.flush()
                    lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                continue
            if line is None:
                break
            if line.startswith(READY_PREFIX):
                return line.split("endpoint=", 1)[1].strip()
        self.kill9_all()
        raise RuntimeError(f"ferrymq up did not become ready; its output:\n{self._log_tail()}")

    def stop(self) -> None:
        """SIGTERM to ``up`` (it stops its children in order); SIGKILL to the group if that hangs."""
        if self._process is not None:
            terminate_group(self._process, STOP_TIMEOUT)
        self.kill9_all()

    def kill9_all(self) -> None:
        """SIGKILL ``up`` and every child at once, as a power cut would; wait until the stand-in is gone."""
        if self._process is None:
            return
        kill_group(self._process)
        self._process = None
        # The stand-in's lock is released only when the process is really gone.
        deadline = time.monotonic() + STOP_TIMEOUT
        while layout.is_locked(self.data_dir / "aws") and time.monotonic() < deadline:
            time.sleep(0.05)

    def restart(self) -> None:
        """Start again on the same data directory (the endpoint may change)."""
        self.stop()
        self.start()

    # --- admin ------------------------------------------------------------------------------------

    def create_credentials(self, account_id: str, user_name: str) -> tuple[str, str]:
        """``ferrymq credentials create``; returns (access key id, secret access key)."""
        result = subprocess.run(
            [*_ferrymq_command(), "credentials", "create", "--account", account_id, "--user", user_name, "--json"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        created = json.loads(result.stdout)
        return created["AccessKeyId"], created["SecretAccessKey"]

    def _log_tail(self, lines: int = 60) -> str:
        try:
            return "".join(self.log_path.read_text().splitlines(keepends=True)[-lines:])
        except OSError:
            return "(no log)"


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = Stack(tmp_path_factory.mktemp("ferrymq-stack"))
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.fixture
def private_stack(tmp_path: Path) -> Iterator[Stack]:
    """A stack of the test's own, for tests that kill or restart it."""
    running = Stack(tmp_path / "ferrymq")
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.fixture(params=["json", "query"])
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def sqs(stack: Stack, protocol: str) -> Any:
    """A boto3 SQS client for the session stack, speaking ``protocol``."""
    return sqs_client(stack.endpoint, protocol, access_key=stack.access_key, secret_key=stack.secret_key,
                      region=stack.region)
