"""The partition map in DynamoDB: which storage worker serves each partition, and since which epoch.

Table ``settings.partitions_table`` (created from ``template.yaml``), one item per partition::

    attribute    type  meaning
    partition    N     partition number (the hash key)
    worker_id    S     the worker that took the partition last
    host         S     where that worker listens for the worker RPC
    port         N
    epoch        N     1 for the first worker, +1 each time a worker takes the partition; the write is
                       conditional on the epoch read just before, so two workers racing cannot get the same one
    updated_at   N     when the partition was taken, ms since the epoch

Reads are strongly consistent.  botocore errors become FerryMQ errors: an unreachable or throttling DynamoDB
is :class:`~ferrymq.errors.ServiceUnavailable` (see :func:`ferrymq.aws.errors.translate_client_errors`),
anything else :class:`~ferrymq.errors.InternalError`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ferrymq.aws.errors import translate_client_errors
from ferrymq.clock import Clock, SystemClock
from ferrymq.errors import InternalError, ServiceUnavailable
from ferrymq.settings import Settings

log = logging.getLogger(__name__)

_REGISTER_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class WorkerAddress:
    worker_id: str
    host: str
    port: int
    epoch: int
    partition: int = 0


class PartitionMap:
    def __init__(self, client: Any, table_name: str, *, clock: Clock | None = None) -> None:
        self._client = client
        self.table_name = table_name
        self._clock = clock or SystemClock()

    @classmethod
    def from_settings(cls, settings: Settings) -> PartitionMap:
        from ferrymq.aws import session

        return cls(session.client("dynamodb", settings), settings.partitions_table)

    def register(self, partition: int, worker_id: str, host: str, port: int) -> int:
        """Take ``partition`` for this worker; returns the new epoch."""
        for _ in range(_REGISTER_ATTEMPTS):
            current = self.lookup(partition)
            epoch = (current.epoch if current is not None else 0) + 1
            if current is None:
                condition = {
                    "ConditionExpression": "attribute_not_exists(#p)",
                    "ExpressionAttributeNames": {"#p": "partition"},
                }
            else:
                condition = {
                    "ConditionExpression": "#e = :seen",
                    "ExpressionAttributeNames": {"#e": "epoch"},
                    "ExpressionAttributeValues": {":seen": {"N": str(current.epoch)}},
                }
            item = {
                "partition": {"N": str(partition)},
                "worker_id": {"S": worker_id},
                "host": {"S": host},
                "port": {"N": str(port)},
                "epoch": {"N": str(epoch)},
                "updated_at": {"N": str(int(self._clock.now() * 1000))},
            }
            with _translated():
                try:
                    self._client.put_item(TableName=self.table_name, Item=item, **condition)
                except ClientError as exc:
                    if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                        raise
                    log.info("partition %d changed hands while registering; retrying", partition)
                    continue
            return epoch
        raise ServiceUnavailable(f"Partition {partition} keeps changing hands; could not register {worker_id}.")

    def lookup(self, partition: int) -> WorkerAddress | None:
        with _translated():
            resp = self._client.get_item(
                TableName=self.table_name, Key={"partition": {"N": str(partition)}}, ConsistentRead=True
            )
        item = resp.get("Item")
        return _address(item) if item else None

    def all(self) -> list[WorkerAddress]:
        """Every registered partition's worker, ordered by partition."""
        out: list[WorkerAddress] = []
        kwargs: dict[str, Any] = {"TableName": self.table_name, "ConsistentRead": True}
        with _translated():
            while True:
                resp = self._client.scan(**kwargs)
                out.extend(_address(item) for item in resp.get("Items", []))
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


@contextmanager
def _translated() -> Iterator[None]:
    """Outages as every adapter reports them; any other ClientError is a fault of ours: logged here, and an
    InternalError to callers, which act on FerryMQ errors only (a move task waits on one, stops on others)."""
    try:
        with translate_client_errors():
            yield
    except ClientError as exc:
        log.error("partition map call failed: %s", exc)
        raise InternalError() from None
