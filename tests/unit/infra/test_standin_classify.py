"""Which requests the stand-in journals, snapshots after, or leaves alone."""

from __future__ import annotations

from typing import Any

import pytest

from ferrymq.infra.standin.classify import Durability, classify, result_needs_snapshot, signing_service


def _signed(service: str, method: str = "POST", path: str = "/", query: str = "", target: str = "") -> dict[str, Any]:
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "HTTP_AUTHORIZATION": f"AWS4-HMAC-SHA256 Credential=test/20250101/us-east-1/{service}/aws4_request, "
        "SignedHeaders=host, Signature=0",
    }
    if target:
        environ["HTTP_X_AMZ_TARGET"] = target
    return environ


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("PutItem", Durability.REPLAY),
        ("UpdateItem", Durability.REPLAY),
        ("DeleteItem", Durability.REPLAY),
        ("BatchWriteItem", Durability.REPLAY),
        ("TransactWriteItems", Durability.REPLAY),
        ("GetItem", Durability.READ),
        ("Query", Durability.READ),
        ("Scan", Durability.READ),
        ("BatchGetItem", Durability.READ),
        ("TransactGetItems", Durability.READ),
        ("DescribeTable", Durability.READ),
        ("ListTables", Durability.READ),
        ("CreateTable", Durability.SNAPSHOT),
        ("UpdateTimeToLive", Durability.SNAPSHOT),
        ("DeleteTable", Durability.SNAPSHOT),
    ],
)
def test_dynamodb_actions(action: str, expected: Durability) -> None:
    # given a DynamoDB request naming the action in X-Amz-Target, then it is classified by action
    assert classify(_signed("dynamodb", target=f"DynamoDB_20120810.{action}")) is expected


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("Decrypt", Durability.READ),
        ("GenerateDataKey", Durability.READ),
        ("DescribeKey", Durability.READ),
        ("ListAliases", Durability.READ),
        ("CreateKey", Durability.SNAPSHOT),
        ("CreateAlias", Durability.SNAPSHOT),
        ("GetParametersForImport", Durability.SNAPSHOT),
        ("SomeFutureAction", Durability.SNAPSHOT),
    ],
)
def test_kms_actions(action: str, expected: Durability) -> None:
    assert classify(_signed("kms", target=f"TrentService.{action}")) is expected


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/bucket/key", "", Durability.READ),
        ("HEAD", "/bucket", "", Durability.READ),
        ("PUT", "/bucket/some/key", "", Durability.REPLAY),
        ("DELETE", "/bucket/key", "", Durability.REPLAY),
        ("POST", "/bucket/key", "uploadId=abc", Durability.REPLAY),
        ("POST", "/bucket/key", "uploads", Durability.SNAPSHOT),
        ("POST", "/bucket/key", "select&select-type=2", Durability.READ),
        ("PUT", "/bucket", "", Durability.SNAPSHOT),
        ("PUT", "/bucket", "versioning", Durability.SNAPSHOT),
        ("POST", "/bucket", "delete", Durability.SNAPSHOT),
        ("DELETE", "/bucket", "", Durability.SNAPSHOT),
    ],
)
def test_s3_requests(method: str, path: str, query: str, expected: Durability) -> None:
    assert classify(_signed("s3", method=method, path=path, query=query)) is expected


def test_other_services_are_not_durable() -> None:
    # given requests to services the stand-in does not keep, then nothing is journaled for them
    assert classify(_signed("sts", query="Action=GetCallerIdentity")) is Durability.READ
    assert classify(_signed("sqs", target="AmazonSQS.CreateQueue")) is Durability.READ


def test_moto_control_api_changes_are_snapshotted() -> None:
    assert classify({"REQUEST_METHOD": "POST", "PATH_INFO": "/moto-api/reset"}) is Durability.SNAPSHOT
    assert classify({"REQUEST_METHOD": "GET", "PATH_INFO": "/moto-api/"}) is Durability.READ


def test_signing_service_comes_from_header_or_presigned_query() -> None:
    assert signing_service(_signed("s3")) == "s3"
    presigned = {"QUERY_STRING": "X-Amz-Credential=test%2F20250101%2Fus-east-1%2Fkms%2Faws4_request&X-Amz-Date=1"}
    assert signing_service(presigned) == "kms"
    assert signing_service({}) is None


def test_versioned_object_writes_need_a_snapshot_after_all() -> None:
    # given a replayable S3 write, when its response carries a real version id, then replay could not reproduce it
    assert result_needs_snapshot(Durability.REPLAY, [("x-amz-version-id", "3HL4kqtJlcpXroDTDmJ")])
    assert not result_needs_snapshot(Durability.REPLAY, [("x-amz-version-id", "null"), ("ETag", '"abc"')])
    assert result_needs_snapshot(Durability.SNAPSHOT, [])
