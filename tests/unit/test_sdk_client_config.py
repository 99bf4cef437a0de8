"""How ferrymq.client resolves its endpoint, TLS verification and credentials from settings (no network)."""

from __future__ import annotations

from pathlib import Path

import boto3
import botocore.session
import pytest
from botocore.config import Config

from ferrymq.client import ca_bundle, client, endpoint_url, is_fifo_queue
from ferrymq.settings import Settings


def test_endpoint_comes_from_host_and_port_or_the_named_url() -> None:
    assert endpoint_url(Settings.from_env({})) == "http://127.0.0.1:9324"
    assert endpoint_url(Settings.from_env({"FERRYMQ_HOST": "mq.internal", "FERRYMQ_PORT": "8443",
                                           "FERRYMQ_TLS": "1"})) == "https://mq.internal:8443"
    assert endpoint_url(Settings.from_env({"FERRYMQ_ENDPOINT_URL": "https://abc.execute-api.aws/prod",
                                           "FERRYMQ_PORT": "0"})) == "https://abc.execute-api.aws/prod"


def test_a_wildcard_listening_host_is_reached_on_loopback() -> None:
    assert endpoint_url(Settings(host="0.0.0.0", port=9000)) == "http://127.0.0.1:9000"
    assert endpoint_url(Settings(host="::", port=9000)) == "http://[::1]:9000"
    assert endpoint_url(Settings(host="fd00::5", port=9000)) == "http://[fd00::5]:9000"


def test_port_zero_without_an_endpoint_url_is_refused() -> None:
    with pytest.raises(ValueError, match="set FERRYMQ_ENDPOINT_URL"):
        endpoint_url(Settings(port=0))


def test_tls_verification_uses_the_local_certificate_only_for_a_local_https_gateway(tmp_path: Path) -> None:
    self_signed = Settings(tls=True, data_dir=tmp_path)
    assert ca_bundle(self_signed, endpoint_url(self_signed)) == tmp_path / "tls" / "cert.pem"
    named = Settings(tls_cert_file=tmp_path / "gateway.pem", tls_key_file=tmp_path / "gateway.key")
    assert ca_bundle(named, endpoint_url(named)) == tmp_path / "gateway.pem"
    assert ca_bundle(Settings(), "http://127.0.0.1:9324") is None
    # an HTTPS endpoint elsewhere (API Gateway) is verified by boto3's own CAs
    assert ca_bundle(Settings(), "https://abc.execute-api.aws/prod") is None


def _session_without_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> boto3.session.Session:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return boto3.session.Session(botocore_session=botocore.session.Session())


def test_the_development_key_is_the_last_resort(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings = Settings(dev_access_key="devkey", dev_secret_key="devsecret")
    empty = _session_without_credentials(monkeypatch, tmp_path)
    credentials = client("sqs", settings=settings, session=empty)._request_signer._credentials
    assert (credentials.access_key, credentials.secret_key) == ("devkey", "devsecret")
    chained = boto3.session.Session(aws_access_key_id="chain", aws_secret_access_key="chainsecret")
    assert client("sqs", settings=settings, session=chained)._request_signer._credentials.access_key == "chain"
    explicit = client("sqs", settings=settings, session=empty, aws_access_key_id="given",
                      aws_secret_access_key="givensecret")
    assert explicit._request_signer._credentials.access_key == "given"


def test_keyword_arguments_override_and_config_merges_over_the_defaults(tmp_path: Path) -> None:
    settings = Settings(region="eu-west-3", tls=True, data_dir=tmp_path, port=9443)
    session = boto3.session.Session(aws_access_key_id="k", aws_secret_access_key="s")
    made = client("sqs", settings=settings, session=session)
    assert made.meta.region_name == "eu-west-3"
    assert made.meta.endpoint_url == "https://127.0.0.1:9443"
    assert made._endpoint.http_session._verify == str(tmp_path / "tls" / "cert.pem")
    assert made.meta.config.retries == {"mode": "standard", "total_max_attempts": 5}
    assert made.meta.config.read_timeout > 20
    other = client("sqs", settings=settings, session=session, region_name="ap-south-1",
                   endpoint_url="http://10.0.0.1:1", verify=False, config=Config(read_timeout=99))
    assert other.meta.region_name == "ap-south-1"
    assert other.meta.endpoint_url == "http://10.0.0.1:1"
    assert other._endpoint.http_session._verify is False
    assert other.meta.config.read_timeout == 99
    assert other.meta.config.retries == {"mode": "standard", "total_max_attempts": 5}


def test_unsupported_services_are_refused_naming_the_supported_ones() -> None:
    with pytest.raises(ValueError, match=r"unsupported service 's3': ferrymq\.client supports sqs"):
        client("s3")


def test_fifo_queues_are_told_by_their_name() -> None:
    assert is_fifo_queue("http://127.0.0.1:9324/queue/us-east-1/000000000000/jobs.fifo")
    assert is_fifo_queue("jobs.fifo")
    assert not is_fifo_queue("http://127.0.0.1:9324/000000000000/jobs")
    assert not is_fifo_queue("http://127.0.0.1:9324/000000000000/fifo")
