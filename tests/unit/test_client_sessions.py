"""Clients from :func:`ferrymq.aws.session.client`: a session each, one loader of botocore's data for them all."""

from __future__ import annotations

import pytest

from ferrymq.aws import session
from ferrymq.settings import Settings


def _loader(client: object) -> object:
    return client._loader  # type: ignore[attr-defined]


def test_clients_share_one_loader_whose_search_path_stays_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a process without AWS_DATA_PATH
    monkeypatch.delenv("AWS_DATA_PATH", raising=False)
    settings = Settings()
    # when clients of several services are made, one after another
    clients = [session.client(service, settings) for service in ("dynamodb", "kms", "s3", "dynamodb")]
    # then they read botocore's data through one loader, whose search path did not grow with each session
    loaders = {id(_loader(c)) for c in clients}
    assert len(loaders) == 1
    paths = _loader(clients[0]).search_paths  # type: ignore[attr-defined]
    assert len(paths) == len(set(paths))
    session.client("sqs", settings)
    assert _loader(clients[0]).search_paths == paths  # type: ignore[attr-defined]
    # and each client is whole: s3's transfer methods, which boto3 adds to its clients, are there
    assert hasattr(clients[2], "upload_fileobj")
    assert [c.meta.service_model.service_name for c in clients] == ["dynamodb", "kms", "s3", "dynamodb"]


def test_each_client_reads_the_credentials_and_region_in_force_when_it_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given credentials in the environment
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "first")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "first-secret")
    first = session.client("dynamodb", Settings(region="eu-west-1"))
    # when they change (as `ferrymq up` points its clients at the stand-in once it runs)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "second")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "second-secret")
    second = session.client("dynamodb", Settings(region="us-east-1"))
    # then the client made after the change signs with the new ones, and the first keeps its own
    assert first._request_signer._credentials.access_key == "first"  # type: ignore[attr-defined]
    assert second._request_signer._credentials.access_key == "second"  # type: ignore[attr-defined]
    assert (first.meta.region_name, second.meta.region_name) == ("eu-west-1", "us-east-1")
    # and a different AWS_DATA_PATH gets a loader of its own
    monkeypatch.setenv("AWS_DATA_PATH", "/nonexistent-models")
    third = session.client("dynamodb", Settings())
    assert _loader(third) is not _loader(first)
    assert "/nonexistent-models" in _loader(third).search_paths  # type: ignore[attr-defined]
