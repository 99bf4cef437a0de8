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
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from ferrymq.infra.standin.access_keys import read_key_pair
from ferrymq.infra.standin.layout import ENDPOINT_FILE
from ferrymq.infra.up_process import UpProcess, ferrymq_command, up_environment
from tests.support.sqs_clients import sqs_client


def _stack_environment(data_dir: Path) -> dict[str, str]:
    env = up_environment(data_dir)
    # No FERRYMQ_REGIONS: every region botocore knows is served, as users get it (tests sign for several).
    # A session's tests make their queues in one account, more than a tenant's limits allow over a whole run;
    # tests/e2e/test_account_limits.py starts a stack with small limits of its own.
    env["FERRYMQ_ACCOUNT_MAX_QUEUES"] = "100000"
    env["FERRYMQ_ACCOUNT_MAX_SHARDS"] = "1000000"
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


class Stack(UpProcess):
    """A running ``ferrymq up`` and what a client needs to talk to it."""

    region = "us-east-1"
    access_key = "test"
    secret_key = "test"

    def __init__(self, data_dir: Path, extra_env: dict[str, str] | None = None) -> None:
        # Built once, so a restart keeps the names a shared endpoint gave this stack.
        super().__init__(data_dir, {**_stack_environment(data_dir), **(extra_env or {})})

    def restart(self) -> None:
        """Start again on the same data directory (the endpoint may change)."""
        self.stop()
        self.start()

    def ferrymq(self, *args: str) -> str:
        """Run ``ferrymq ARGS`` against this stack; returns its stdout."""
        result = subprocess.run(
            [*ferrymq_command(), *args], env=self.env, capture_output=True, text=True, timeout=60, check=False
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def aws_client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client for this stack's AWS services: its stand-in, signing with the key pair only the stack
        holds, or the shared endpoint a test run named, with the caller's credentials."""
        external = self.env.get("AWS_ENDPOINT_URL")
        if external:
            keys = {"aws_access_key_id": self.env.get("AWS_ACCESS_KEY_ID"),
                    "aws_secret_access_key": self.env.get("AWS_SECRET_ACCESS_KEY")}
            return boto3.client(service, endpoint_url=external, region_name=self.region, **{**keys, **kwargs})
        standin = self.data_dir / "aws"
        key_pair = read_key_pair(standin)
        assert key_pair is not None, f"no stand-in key pair in {standin}"
        keys = {"aws_access_key_id": key_pair.access_key_id, "aws_secret_access_key": key_pair.secret_access_key}
        return boto3.client(service, endpoint_url=(standin / ENDPOINT_FILE).read_text().strip(),
                            region_name=self.region, **{**keys, **kwargs})

    def create_credentials(self, account_id: str, user_name: str) -> tuple[str, str]:
        """``ferrymq credentials create``; returns (access key id, secret access key)."""
        created = json.loads(self.ferrymq("credentials", "create", "--account", account_id, "--user", user_name,
                                          "--json"))
        return created["AccessKeyId"], created["SecretAccessKey"]


def started(data_dir: Path, extra_env: dict[str, str] | None = None) -> Iterator[Stack]:
    """A started stack on ``data_dir`` with ``extra_env``, stopped when the generator is closed (for fixtures:
    ``yield from started(...)``)."""
    running = Stack(data_dir, extra_env)
    try:
        running.start()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from started(tmp_path_factory.mktemp("ferrymq-stack"))


@pytest.fixture
def private_stack(tmp_path: Path) -> Iterator[Stack]:
    """A stack of the test's own, for tests that kill or restart it."""
    yield from started(tmp_path / "ferrymq")


@pytest.fixture(scope="session")
def tls_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A stack for the session serving HTTPS with the self-signed certificate ``FERRYMQ_TLS=1`` makes."""
    yield from started(tmp_path_factory.mktemp("ferrymq-tls"), {"FERRYMQ_TLS": "1"})


@pytest.fixture(params=["json", "query"])
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def sqs(stack: Stack, protocol: str) -> Any:
    """A boto3 SQS client for the session stack, speaking ``protocol``."""
    return sqs_client(stack.endpoint, protocol, access_key=stack.access_key, secret_key=stack.secret_key,
                      region=stack.region)
