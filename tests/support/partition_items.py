"""Partition items with a worker's address and an epoch but no replica set: what workers of before replica
sets left (upgrades must go on from them), and how a test points the front end at a worker it runs itself,
outside any cluster."""

from __future__ import annotations

from typing import Any


def address_item(client: Any, table: str, partition: int, worker_id: str, host: str, port: int, epoch: int) -> None:
    """Write (or overwrite) the address and epoch of ``partition``'s item, keeping its other attributes."""
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
