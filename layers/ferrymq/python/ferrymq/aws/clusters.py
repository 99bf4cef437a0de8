"""The storage clusters, for the out-cluster manager: which partitions each has, how many queues it may hold
and how many it holds.

Items live in the workers table (``settings.workers_table``) under the reserved hash key ``#clusters``, one
per cluster, so that every cluster is one strongly consistent Query however many share the table::

    attribute    type  meaning
    cluster      S     ``#clusters``
    worker_id    S     the cluster's name
    partitions   L     the partitions whose replica sets the cluster holds (numbers)
    max_queues   N     the cluster's capacity: queues placed on it never go over it
    queues       N     the queues placed on it and not deleted

``queues`` moves only by conditional ``ADD``: taking room for a queue is refused once it would pass
``max_queues``, so two front ends placing queues at once can never overfill a cluster between them. A front
end that dies between taking room and writing the queue leaves the count one high, which errs on the safe
side (the cluster looks fuller than it is).
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ferrymq.aws.errors import outages_or_internal
from ferrymq.settings import Settings

log = logging.getLogger(__name__)

REGISTRY_KEY = "#clusters"


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    name: str
    partitions: tuple[int, ...]
    max_queues: int
    queues: int

    @property
    def room(self) -> int:
        return max(0, self.max_queues - self.queues)


class ClusterFull(Exception):
    """The cluster has no room left for the queues asked for."""


class ClusterRegistry:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self.table_name = table_name

    @classmethod
    def from_settings(cls, settings: Settings) -> ClusterRegistry:
        from ferrymq.aws import session

        return cls(session.client("dynamodb", settings), settings.workers_table)

    def register(self, name: str, partitions: list[int], max_queues: int) -> ClusterInfo:
        """Record the cluster's partitions and capacity, keeping the count of queues it already holds."""
        if not partitions:
            raise ValueError("a cluster holds at least one partition")
        if max_queues < 1:
            raise ValueError("a cluster's capacity is at least one queue")
        with _translated():
            resp = self._client.update_item(
                TableName=self.table_name,
                Key=_key(name),
                UpdateExpression="SET #p = :p, #m = :m, #q = if_not_exists(#q, :zero)",
                ExpressionAttributeNames={"#p": "partitions", "#m": "max_queues", "#q": "queues"},
                ExpressionAttributeValues={
                    ":p": {"L": [{"N": str(p)} for p in sorted(set(partitions))]},
                    ":m": {"N": str(max_queues)},
                    ":zero": {"N": "0"},
                },
                ReturnValues="ALL_NEW",
            )
        return _decode(resp["Attributes"])

    def all(self) -> list[ClusterInfo]:
        """Every registered cluster, by name."""
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "ConsistentRead": True,
            "KeyConditionExpression": "#c = :c",
            "ExpressionAttributeNames": {"#c": "cluster"},
            "ExpressionAttributeValues": {":c": {"S": REGISTRY_KEY}},
        }
        out: list[ClusterInfo] = []
        with _translated():
            while True:
                resp = self._client.query(**kwargs)
                out.extend(_decode(item) for item in resp.get("Items", []))
                last = resp.get("LastEvaluatedKey")
                if not last:
                    break
                kwargs["ExclusiveStartKey"] = last
        return sorted(out, key=lambda c: c.name)

    def take(self, cluster: ClusterInfo, count: int = 1) -> ClusterInfo:
        """Count ``count`` more queues on ``cluster`` (as read); ClusterFull when that would pass its capacity.

        Condition expressions have no arithmetic, so the limit is worked out from the capacity read, and the
        capacity is part of the condition: one changed since is refused too, and the caller reads again.
        """
        limits = {":m": cluster.max_queues, ":limit": cluster.max_queues - count}
        return self._add(cluster.name, count, "#m = :m AND #q <= :limit", limits)

    def release(self, name: str, count: int = 1) -> None:
        """Count ``count`` fewer queues (deleted ones); never below zero."""
        try:
            self._add(name, -count, "attribute_exists(#m) AND #q >= :n", {":n": count})
        except ClusterFull:
            log.warning("cluster %s: released %d queue(s) more than it counted", name, count)

    def _add(self, name: str, delta: int, condition: str, numbers: dict[str, int]) -> ClusterInfo:
        with _translated():
            try:
                resp = self._client.update_item(
                    TableName=self.table_name,
                    Key=_key(name),
                    UpdateExpression="ADD #q :d",
                    ConditionExpression=condition,
                    ExpressionAttributeNames={"#q": "queues", "#m": "max_queues"},
                    ExpressionAttributeValues={
                        ":d": {"N": str(delta)}, **{k: {"N": str(v)} for k, v in numbers.items()}
                    },
                    ReturnValues="ALL_NEW",
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    raise ClusterFull(name) from None
                raise
        return _decode(resp["Attributes"])


def _key(name: str) -> dict[str, Any]:
    return {"cluster": {"S": REGISTRY_KEY}, "worker_id": {"S": name}}


def _decode(item: dict[str, Any]) -> ClusterInfo:
    return ClusterInfo(
        name=item["worker_id"]["S"],
        partitions=tuple(int(p["N"]) for p in item["partitions"]["L"]),
        max_queues=int(item["max_queues"]["N"]),
        queues=int(item["queues"]["N"]),
    )


def _translated() -> AbstractContextManager[None]:
    return outages_or_internal("cluster registry call", log)
