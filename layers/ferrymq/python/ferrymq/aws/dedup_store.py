"""FIFO deduplication IDs in DynamoDB.

Table ``settings.dedup_table``, one item per deduplication key::

    pk (S, hash key)     "<queue_id>#<message group or empty>#<deduplication id>"; the group is part of the
                         key only when the queue's DeduplicationScope is messageGroup
    message_id (S)       the message that claimed the key first
    expires_at (N)       seconds since the epoch, DEDUP_WINDOW_SECONDS (:mod:`ferrymq.limits`) after the claim;
                         also the table's TTL attribute

DynamoDB deletes expired items lazily (hours late) and local stand-ins not at all, so a claim compares
``expires_at`` itself: an expired item is free to be claimed again.

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

    def claim(self, key: str, message_id: str, now: float) -> str:
        """The id of the message that owns ``key`` within the window: ``message_id`` when this call claimed it."""
        item = {
            "pk": {"S": key},
            "message_id": {"S": message_id},
            "expires_at": {"N": str(int(now) + DEDUP_WINDOW_SECONDS)},
        }
        with translate_client_errors():
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item=item,
                    ConditionExpression="attribute_not_exists(pk) OR expires_at < :now",
                    ExpressionAttributeValues={":now": {"N": str(int(now))}},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
                return message_id
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                old = exc.response.get("Item")
            if old is None:
                old = self._client.get_item(
                    TableName=self._table, Key={"pk": {"S": key}}, ConsistentRead=True
                ).get("Item")
        if old is None:
            # Claimed and expired-then-deleted between our two calls: the key is free now.
            return self.claim(key, message_id, now)
        return str(old["message_id"]["S"])
