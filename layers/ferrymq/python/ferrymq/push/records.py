"""Lambda's SQS event: the records a batch of received messages makes, and what the target's answer means.

The answer rules are Lambda's: without ``ReportBatchItemFailures`` any success deletes the whole batch; with it,
``{"batchItemFailures": [{"itemIdentifier": id}, ...]}`` keeps only the listed messages, an empty list (or an empty
or null answer) keeps none, and an identifier that is empty or names no message of the batch, or an answer of
any other shape, fails the whole batch. On a FIFO queue a group stops at its first failure: every later record of
that group is kept too, so the group is delivered again in order.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

EVENT_SOURCE = "aws:sqs"
MAX_PAYLOAD_BYTES = 6 * 1024 * 1024
"""Lambda's limit on a synchronous invocation's payload, which FerryMQ keeps for HTTP pushes too."""
_EVENT_OVERHEAD = len(b'{"Records":[]}')


def _attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    binary = value.get("BinaryValue")
    if isinstance(binary, bytes | bytearray):
        binary = base64.b64encode(binary).decode("ascii")
    return {
        "stringValue": value.get("StringValue"),
        "binaryValue": binary,
        "stringListValues": list(value.get("StringListValues") or []),
        "binaryListValues": [base64.b64encode(b).decode("ascii") if isinstance(b, bytes | bytearray) else b
                             for b in value.get("BinaryListValues") or []],
        "dataType": value.get("DataType"),
    }


def record(message: Mapping[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """The Lambda record of one message as ReceiveMessage renders it (all attributes asked for)."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes") or {}),
        "messageAttributes": {k: _attribute(v) for k, v in (message.get("MessageAttributes") or {}).items()},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": EVENT_SOURCE,
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def event(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"Records": list(records)}


def split(records: Sequence[dict[str, Any]], limit: int = MAX_PAYLOAD_BYTES) -> list[list[dict[str, Any]]]:
    """``records`` in order, cut into runs whose event is at most ``limit`` bytes (a record alone past it is a run
    of its own)."""
    runs: list[list[dict[str, Any]]] = []
    size = limit + 1
    for r in records:
        length = len(orjson.dumps(r)) + 1
        if size + length > limit:
            runs.append([])
            size = _EVENT_OVERHEAD
        runs[-1].append(r)
        size += length
    return runs


class BatchFailed(Exception):
    """The target's answer fails the whole batch."""


def failed_ids(answer: object, records: Sequence[Mapping[str, Any]], *, report_failures: bool,
               fifo: bool) -> set[str]:
    """The message ids to keep after a successful invocation that answered ``answer`` (parsed JSON, or None for
    an empty answer). Raises BatchFailed when the answer fails the whole batch."""
    if not report_failures or answer is None:
        return set()
    if not isinstance(answer, dict):
        raise BatchFailed("the answer is not a JSON object")
    listed = answer.get("batchItemFailures")
    if listed is None:
        return set()
    if not isinstance(listed, list):
        raise BatchFailed("batchItemFailures is not a list")
    ids = [r["messageId"] for r in records]
    known = set(ids)
    failed: set[str] = set()
    for item in listed:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(identifier, str) or not identifier or identifier not in known:
            raise BatchFailed(f"itemIdentifier {identifier!r} names no record of the batch")
        failed.add(identifier)
    return _after_first_failure(records, failed) if fifo else failed


def _after_first_failure(records: Iterable[Mapping[str, Any]], failed: set[str]) -> set[str]:
    stopped: set[str] = set()
    kept: set[str] = set()
    for r in records:
        group = r["attributes"].get("MessageGroupId", "")
        if group in stopped or r["messageId"] in failed:
            stopped.add(group)
            kept.add(r["messageId"])
    return kept
