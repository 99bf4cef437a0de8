"""Which requests change durable state, and whether replaying them reproduces that change exactly.

Only DynamoDB, S3 and KMS are kept durable. A request to them is one of:

- ``READ``: changes nothing; not journaled.
- ``REPLAY``: a data-plane write whose effect is a pure function of the request and the prior state (item
  writes, single-object writes in unversioned buckets); journaled, and replayed on start.
- ``SNAPSHOT``: any other mutation, including everything whose result comes from a random source (KMS key
  material and ids, S3 version and upload ids); a snapshot is taken before its response is returned. This
  is the default for anything not known to be a read or a replayable write, so an unknown operation costs
  time, never durability.

Requests to any other service are ``READ`` as far as durability goes: they live in memory only.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs


class Durability(enum.Enum):
    READ = "read"
    REPLAY = "replay"
    SNAPSHOT = "snapshot"


_DYNAMODB_REPLAYABLE = frozenset(
    {
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchWriteItem",
        "TransactWriteItems",
        "ExecuteStatement",
        "BatchExecuteStatement",
        "ExecuteTransaction",
    }
)
_DYNAMODB_READ_PREFIXES = ("Get", "BatchGet", "Query", "Scan", "Describe", "List", "TransactGet")

_KMS_READS = frozenset(
    {
        "Encrypt",
        "Decrypt",
        "ReEncrypt",
        "GenerateDataKey",
        "GenerateDataKeyWithoutPlaintext",
        "GenerateDataKeyPair",
        "GenerateDataKeyPairWithoutPlaintext",
        "GenerateRandom",
        "GenerateMac",
        "VerifyMac",
        "Sign",
        "Verify",
        "DeriveSharedSecret",
    }
)
_KMS_READ_PREFIXES = ("Describe", "List", "Get")
# Starts like a read but stores a freshly generated import token.
_KMS_MUTATING_GETS = frozenset({"GetParametersForImport"})

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def signing_service(environ: Mapping[str, Any]) -> str | None:
    """The service named in the SigV4 credential scope (header or presigned query), if any."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    scope = ""
    if "Credential=" in auth:
        scope = auth.split("Credential=", 1)[1].split(",", 1)[0]
    else:
        credential = parse_qs(environ.get("QUERY_STRING", "")).get("X-Amz-Credential")
        if credential:
            scope = credential[0]
    parts = scope.strip().split("/")
    return parts[3].lower() if len(parts) >= 5 else None


def classify(environ: Mapping[str, Any]) -> Durability:
    method = environ.get("REQUEST_METHOD", "GET").upper()
    path = environ.get("PATH_INFO", "/")
    if path.startswith("/moto-api/"):
        # moto's own control API (reset, seeding): rare, so make its effect durable wholesale.
        return Durability.READ if method in _SAFE_METHODS else Durability.SNAPSHOT
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target:
        prefix, _, action = target.partition(".")
        if prefix.startswith("DynamoDB_"):
            return _classify_dynamodb(action)
        if prefix == "TrentService":
            return _classify_kms(action)
        return Durability.READ
    service = signing_service(environ)
    # moto sends requests it cannot attribute to S3, so do the same.
    if service in (None, "s3"):
        return _classify_s3(method, path, environ.get("QUERY_STRING", ""))
    return Durability.READ


def _classify_dynamodb(action: str) -> Durability:
    if action in _DYNAMODB_REPLAYABLE:
        return Durability.REPLAY
    if action.startswith(_DYNAMODB_READ_PREFIXES):
        return Durability.READ
    return Durability.SNAPSHOT


def _classify_kms(action: str) -> Durability:
    if action in _KMS_MUTATING_GETS:
        return Durability.SNAPSHOT
    if action in _KMS_READS or action.startswith(_KMS_READ_PREFIXES):
        return Durability.READ
    return Durability.SNAPSHOT


def _classify_s3(method: str, path: str, query: str) -> Durability:
    if method in _SAFE_METHODS:
        return Durability.READ
    params = parse_qs(query, keep_blank_values=True)
    if method == "POST" and "select" in params:
        return Durability.READ
    if method == "POST" and "uploads" in params:
        # CreateMultipartUpload: the upload id is random.
        return Durability.SNAPSHOT
    is_object = "/" in path.strip("/")
    if is_object and method in ("PUT", "DELETE", "POST"):
        return Durability.REPLAY
    return Durability.SNAPSHOT


def result_needs_snapshot(durability: Durability, response_headers: list[tuple[str, str]]) -> bool:
    """Whether an applied request's outcome was random after all: S3 writes in versioned buckets."""
    if durability is Durability.SNAPSHOT:
        return True
    return any(name.lower() == "x-amz-version-id" and value != "null" for name, value in response_headers)
