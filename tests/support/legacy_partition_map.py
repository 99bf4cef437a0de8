"""Partition items as FerryMQ wrote them before replica sets: the serving worker's address and an epoch
that grew by one per registration, with no replica set. Upgrades must go on from them."""

from __future__ import annotations

from typing import Any


def legacy_item(client: Any, table: str, partition: int, worker_id: str, host: str, port: int, epoch: int) -> None:
    """Write (or overwrite) the attributes a pre-replication worker's registration left, keeping the rest."""
    client.update_item(
        TableName=table,
        Key={"partition": {"N": str(partition)}},
        UpdateExpression="SET worker_id = :w, host = :h, #p = :p, epoch = :e",
        ExpressionAttributeNames={"#p": "port"},
        ExpressionAttributeValues={
            ":w": {"S": worker_id},
            ":h": {"S": host},
            ":p": {"N": str(port)},
            ":e": {"N": str(epoch)},
        },
    )
