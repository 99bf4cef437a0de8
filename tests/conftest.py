"""Fixtures shared by every test level.

``aws_settings`` gives tests a real AWS API endpoint: LocalStack or another endpoint when
``FERRYMQ_TEST_AWS_ENDPOINT`` names one, otherwise FerryMQ's durable stand-in (moto behind a journal) as a
process of its own on a free loopback port. Unlike moto's bare threaded server, the stand-in applies writes
one at a time, so DynamoDB's conditional writes are as atomic as FerryMQ relies on; it accepts only requests
signed with the session's test key pair (``AWS_TEST_ENV``). The environment variables boto3 reads are set for
the whole session, so child processes inherit them too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferrymq.infra.standin.access_keys import KeyPair
from ferrymq.settings import Settings
from tests.support.processes import terminate_group

pytest_plugins = ["tests.support.spark_session", "tests.support.stack"]

AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


# One gateway process for every stack a test starts, whatever the machine's cores ("auto" starts more on a larger
# machine): what a test counts is then counted at once, and a stack's processes are the same everywhere.
# tests/e2e/test_gateway_processes.py runs a stack of several.
os.environ.setdefault("FERRYMQ_GATEWAY_PROCESSES", "1")
# Workers sync their commits on the event loop after a second of quick syncs, not ten: the suite's stacks are
# mostly younger than ten seconds, and should run the path a stack that has been up a while runs.
os.environ.setdefault("FERRYMQ_WORKER_SYNC_CALM_SECONDS", "1")

STANDIN_START_SECONDS = 60.0
STANDIN_KEY_PAIR = KeyPair(AWS_TEST_ENV["AWS_ACCESS_KEY_ID"], AWS_TEST_ENV["AWS_SECRET_ACCESS_KEY"])


def _start_standin(data_dir: Path) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "ferrymq.infra.standin", "--host", "127.0.0.1", "--port", "0",
         "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        env={**os.environ, **STANDIN_KEY_PAIR.environment()},
    )
    assert process.stdout is not None
    deadline = time.monotonic() + STANDIN_START_SECONDS
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if line.startswith("FERRYMQ_STANDIN_READY"):
            return process, line.split()[1]
    terminate_group(process, 5)
    raise RuntimeError("the AWS stand-in did not become ready")


@pytest.fixture(scope="session")
def aws_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    saved = {k: os.environ.get(k) for k in [*AWS_TEST_ENV, "AWS_ENDPOINT_URL"]}
    os.environ.update(AWS_TEST_ENV)
    external = os.environ.get("FERRYMQ_TEST_AWS_ENDPOINT")
    process = None
    if external:
        endpoint = external
    else:
        process, endpoint = _start_standin(tmp_path_factory.mktemp("aws-standin"))
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    try:
        yield endpoint
    finally:
        if process is not None:
            terminate_group(process, 10)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def aws_settings(aws_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings pointing at the test AWS endpoint, with FerryMQ's tables, bucket and key bootstrapped."""
    from ferrymq.infra.bootstrap import bootstrap

    settings = Settings(
        aws_endpoint_url=aws_endpoint,
        data_dir=Path(tmp_path_factory.mktemp("ferrymq-data")),
        table_prefix="ferrymq-test-",
    )
    bootstrap(settings)
    return settings
