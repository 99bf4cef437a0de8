"""FIFO deduplication IDs in DynamoDB.

Table ``settings.dedup_table``, one item per deduplication key::

    pk (S, hash key)     "<queue_id>#<message group or empty>#<deduplication id>"; the group is part of the
                         key only when the queue's DeduplicationScope is messageGroup
    message_id (S)       the message that claimed the key first
    expires_at (N)       seconds since the epoch, DEDUP_WINDOW_SECONDS (:mod:`ferrymq.limits`) after the claim;
                         also the table's TTL attribute
    claimed_ms (N)       when the claim was made, in ms (items written before it existed lack it: their claim
                         time is read as ``expires_at - DEDUP_WINDOW_SECONDS``)

DynamoDB deletes expired items lazily (hours late) and local stand-ins not at all, so a claim compares
``expires_at`` itself: an expired item is free to be claimed again.  So is a claim made before the queue was
last purged (``purged_at``): AWS forgets deduplication ids on PurgeQueue, and comparing claim times does that
without finding and deleting the queue's items.

A claim that finds the key taken returns the earlier message id instead of failing. The front end then
sends that message id to the storage worker again, which stores a message only once per id: so when a
first attempt wrote the claim but failed before the worker acknowledged, the client's retry still gets its
message stored, exactly once.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from ferrymq.aws.errors import translate_client_errors
from ferrymq.limits import DEDUP_WINDOW_SECONDS


def dedup_key(queue_id: str, group: str | None, dedup_id: str) -> str:
    return f"{queue_id}#{group or ''}#{dedup_id}"


class DedupStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def claim(self, key: str, message_id: str, now: float, *, purged_at: float | None = None) -> str:
        """The id of the message that owns ``key`` within the window: ``message_id`` when this call claimed it.

        ``purged_at``: when the queue was last purged; a claim made before then owns nothing any more.
        """
        item = {
            "pk": {"S": key},
            "message_id": {"S": message_id},
            "expires_at": {"N": str(int(now) + DEDUP_WINDOW_SECONDS)},
            "claimed_ms": {"N": str(int(now * 1000))},
        }
        condition = "attribute_not_exists(pk) OR expires_at < :now"
        values: dict[str, Any] = {":now": {"N": str(int(now))}}
        if purged_at is not None:
            condition += (
                " OR claimed_ms < :purged_ms"
                " OR (attribute_not_exists(claimed_ms) AND expires_at < :purged_expiry)"
            )
            values[":purged_ms"] = {"N": str(int(purged_at * 1000))}
            values[":purged_expiry"] = {"N": str(int(purged_at) + DEDUP_WINDOW_SECONDS)}
        with translate_client_errors():
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item=item,
                    ConditionExpression=condition,
                    ExpressionAttributeValues=values,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return message_id
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                old = exc.response.get("Item")
            if old is None:
                old = self._get(key)
        if old is None:
            # Claimed and expired-then-deleted between our two calls: the key is free now.
            return self.claim(key, message_id, now, purged_at=purged_at)
        return str(old["message_id"]["S"])

    def _get(self, key: str) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self._client.get_item(
            TableName=self._table, Key={"pk": {"S": key}}, ConsistentRead=True
        ).get("Item")
        return item
