"""``ferrymq.client("sqs")`` against running stacks, configured from the environment alone: endpoint, region,
credentials (the standard chain before the development key) and the local gateway's TLS certificate."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, SSLError

import ferrymq
from tests.e2e.conftest import Stack

# The variables of the standard credential chain, and files it would read.
_CHAIN = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
          "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No credentials anywhere in the standard chain, and no FerryMQ or endpoint variables."""
    for name in _CHAIN:
        monkeypatch.delenv(name, raising=False)
    for name in ("FERRYMQ_ENDPOINT_URL", "FERRYMQ_HOST", "FERRYMQ_PORT", "FERRYMQ_TLS", "FERRYMQ_TLS_CERT_FILE",
                 "FERRYMQ_DATA_DIR", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return monkeypatch


def _round_trip(sqs: Any) -> None:
    url = sqs.create_queue(QueueName=f"sdk-client-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in got] == ["hello"]


def test_endpoint_url_from_the_environment_and_the_development_key(stack: Stack,
                                                                   clean_env: pytest.MonkeyPatch) -> None:
    # given only FERRYMQ_ENDPOINT_URL and FERRYMQ_REGION, and no credentials in the chain
    clean_env.setenv("FERRYMQ_ENDPOINT_URL", stack.endpoint)
    clean_env.setenv("FERRYMQ_REGION", "eu-north-1")
    sqs = ferrymq.client("sqs")
    # then the client talks to the stack, in that region, with the development key
    assert sqs.meta.endpoint_url == stack.endpoint
    assert sqs.meta.region_name == "eu-north-1"
    _round_trip(sqs)
    assert "eu-north-1" in sqs.list_queues()["QueueUrls"][0]


def test_host_and_port_from_the_environment(stack: Stack, clean_env: pytest.MonkeyPatch) -> None:
    address = urlsplit(stack.endpoint)
    clean_env.setenv("FERRYMQ_HOST", str(address.hostname))
    clean_env.setenv("FERRYMQ_PORT", str(address.port))
    sqs = ferrymq.client("sqs")
    assert sqs.meta.endpoint_url == stack.endpoint
    _round_trip(sqs)


def test_credentials_of_the_standard_chain_come_before_the_development_key(stack: Stack,
                                                                           clean_env: pytest.MonkeyPatch) -> None:
    # given a key in the environment that the stack does not know
    clean_env.setenv("FERRYMQ_ENDPOINT_URL", stack.endpoint)
    clean_env.setenv("AWS_ACCESS_KEY_ID", "AKIAUNKNOWNKEY000000")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    # then the client signs with it, and the stack refuses it as SQS refuses an unknown key
    with pytest.raises(ClientError) as caught:
        ferrymq.client("sqs").list_queues()
    assert caught.value.response["Error"]["Code"] == "InvalidClientTokenId"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    # and explicit arguments come before both
    _round_trip(ferrymq.client("sqs", aws_access_key_id=stack.access_key, aws_secret_access_key=stack.secret_key))


def test_https_gateway_with_its_self_signed_certificate(tls_stack: Stack, clean_env: pytest.MonkeyPatch) -> None:
    # given a stack serving HTTPS with the certificate it made in its data directory
    address = urlsplit(tls_stack.endpoint)
    assert address.scheme == "https"
    clean_env.setenv("FERRYMQ_TLS", "1")
    clean_env.setenv("FERRYMQ_DATA_DIR", str(tls_stack.data_dir))
    clean_env.setenv("FERRYMQ_HOST", str(address.hostname))
    clean_env.setenv("FERRYMQ_PORT", str(address.port))
    # then a client from the environment trusts that certificate
    sqs = ferrymq.client("sqs")
    assert sqs.meta.endpoint_url == tls_stack.endpoint
    _round_trip(sqs)
    # (an open keep-alive connection would hold up the stack's stop)
    sqs.close()
    # while a client told to use the system's CAs instead refuses the gateway
    with pytest.raises(SSLError):
        ferrymq.client("sqs", verify=True, config=Config(retries={"max_attempts": 1})).list_queues()


def test_other_services_are_refused() -> None:
    with pytest.raises(ValueError, match=r"unsupported service 'sns': ferrymq\.client supports sqs, ferrymq"):
        ferrymq.client("sns")
