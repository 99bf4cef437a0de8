"""Fixtures shared by every test level.

``aws_settings`` gives tests a real AWS API endpoint: LocalStack or another endpoint when
``FERRYMQ_TEST_AWS_ENDPOINT`` names one, otherwise moto's server on a free loopback port. The environment
variables boto3 reads are set for the whole session, so child processes inherit them too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferrymq.settings import Settings

AWS_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="session")
def aws_endpoint() -> Iterator[str]:
    saved = {k: os.environ.get(k) for k in [*AWS_TEST_ENV, "AWS_ENDPOINT_URL"]}
    os.environ.update(AWS_TEST_ENV)
    external = os.environ.get("FERRYMQ_TEST_AWS_ENDPOINT")
    server = None
    if external:
        endpoint = external
    else:
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    try:
        yield endpoint
    finally:
        if server is not None:
            server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def aws_settings(aws_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """Settings pointing at the test AWS endpoint, with FerryMQ's tables, bucket and key bootstrapped."""
    from infra.bootstrap import bootstrap

    settings = Settings(
        aws_endpoint_url=aws_endpoint,
        data_dir=Path(tmp_path_factory.mktemp("ferrymq-data")),
        table_prefix="ferrymq-test-",
    )
    bootstrap(settings)
    return settings
