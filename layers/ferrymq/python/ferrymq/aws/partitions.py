"""The partition map in DynamoDB: which storage worker leads each partition, and since which epoch; the front
end's lookup of where a partition's requests go.

Table ``settings.partitions_table`` (created from ``template.yaml``), one item per partition::

    attribute    type  meaning
    partition    N     partition number (the hash key)
    worker_id    S     the worker that claimed the partition's current epoch (ReplicaSets.claim)
    host         S     where that worker listens for the worker RPC
    port         N
    epoch        N     the leader epoch (see ferrymq.aws.replica_sets, which owns every write of it)
    receipt_key  B     32 random bytes that key the partition's receipt handles; written once, by the first
                       worker to ask (``if_not_exists``), and kept when the partition changes hands

Reads are strongly consistent.  botocore errors become FerryMQ errors: an unreachable or throttling DynamoDB
is :class:`~ferrymq.errors.ServiceUnavailable` (see :func:`ferrymq.aws.errors.translate_client_errors`),
anything else :class:`~ferrymq.errors.InternalError`.
"""

from __future__ import annotations

import logging
import secrets
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from ferrymq.aws.errors import outages_or_internal
from ferrymq.settings import Settings

log = logging.getLogger(__name__)

RECEIPT_KEY_BYTES = 32


@dataclass(frozen=True, slots=True)
class WorkerAddress:
    worker_id: str
    host: str
    port: int
    epoch: int
    partition: int = 0


class PartitionMap:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self.table_name = table_name

    @classmethod
    def from_settings(cls, settings: Settings) -> PartitionMap:
        from ferrymq.aws import session

        return cls(session.client("dynamodb", settings), settings.partitions_table)

    def receipt_key(self, partition: int) -> bytes:
        """The key that authenticates the partition's receipt handles, made by whoever asks first.

        It lives with the partition, not beside any worker's log, so a handle issued by one worker stays
        valid on every worker that serves the partition later, across restarts.
        """
        with _translated():
            resp = self._client.update_item(
                TableName=self.table_name,
                Key={"partition": {"N": str(partition)}},
                UpdateExpression="SET #k = if_not_exists(#k, :k)",
                ExpressionAttributeNames={"#k": "receipt_key"},
                ExpressionAttributeValues={":k": {"B": secrets.token_bytes(RECEIPT_KEY_BYTES)}},
                ReturnValues="ALL_NEW",
            )
        return bytes(resp["Attributes"]["receipt_key"]["B"])

    def lookup(self, partition: int) -> WorkerAddress | None:
        with _translated():
            resp = self._client.get_item(
                TableName=self.table_name, Key={"partition": {"N": str(partition)}}, ConsistentRead=True
            )
        item = resp.get("Item")
        return _address(item) if item and "worker_id" in item else None

    def all(self) -> list[WorkerAddress]:
        """Every registered partition's worker, ordered by partition."""
        out: list[WorkerAddress] = []
        kwargs: dict[str, Any] = {"TableName": self.table_name, "ConsistentRead": True}
        with _translated():
            while True:
                resp = self._client.scan(**kwargs)
                out.extend(_address(item) for item in resp.get("Items", []) if "worker_id" in item)
                last = resp.get("LastEvaluatedKey")
                if not last:
                    break
                kwargs["ExclusiveStartKey"] = last
        return sorted(out, key=lambda a: a.partition)


def _address(item: dict[str, Any]) -> WorkerAddress:
    return WorkerAddress(
        worker_id=item["worker_id"]["S"],
        host=item["host"]["S"],
        port=int(item["port"]["N"]),
        epoch=int(item["epoch"]["N"]),
        partition=int(item["partition"]["N"]),
    )


def _translated() -> AbstractContextManager[None]:
    return outages_or_internal("partition map call", log)
