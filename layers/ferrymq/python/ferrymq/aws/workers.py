"""The storage workers of each cluster, and whether they are alive, in DynamoDB.

Table ``settings.workers_table`` (created from ``template.yaml``), one item per worker::

    attribute     type  meaning
    cluster       S     the worker's cluster (the hash key)
    worker_id     S     the worker (the range key); ids starting with ``#`` are reserved for the cluster's
                        own items, such as the in-cluster manager's lease, which live beside its workers
    host          S     where the worker listens for the worker RPC
    port          N
    heartbeat_at  N     ms since the Unix epoch, of the worker's last heartbeat
    started_at    N     ms since the Unix epoch, when the worker process started
    admin         S     host:port of the worker's admin HTTP listener (health checks, metrics); absent when
                        it runs none
    state         S     joining | serving | leaving; a worker's heartbeat never takes it out of leaving (only
                        ``set_state`` does), so a worker being removed cannot undo that by beating on

The cluster is the hash key so that a cluster's members are one strongly consistent Query, however many
clusters share the table; whoever looks up a worker knows its cluster, since a partition's item names it.

Liveness is judged by comparing ``heartbeat_at`` with the caller's clock (:meth:`WorkerRegistry.members`), never by
deleting stale items: TTL deletion is lazy in DynamoDB and absent from the stand-ins. Outages are
ServiceUnavailable (:func:`ferrymq.aws.errors.translate_client_errors`), any other ClientError an
InternalError.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from botocore.exceptions import ClientError

from ferrymq.aws.errors import outages_or_internal
from ferrymq.replication_rules import heartbeat_fresh
from ferrymq.settings import Settings

log = logging.getLogger(__name__)

RESERVED_PREFIX = "#"
MANAGER_ITEM = "#manager"
"""The in-cluster manager's lease: ``holder`` (S) and ``lease_until`` (N, ms)."""


class WorkerState(StrEnum):
    JOINING = "joining"
    """Catching up; not yet serving any partition it holds."""
    SERVING = "serving"
    LEAVING = "leaving"
    """Handing its partitions over before it stops."""


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    worker_id: str
    cluster: str
    host: str
    port: int
    heartbeat_at: int
    started_at: int
    state: WorkerState
    admin: str | None = None
    """``host:port`` of the worker's admin HTTP listener (/health/live, /health/ready, /metrics), if any."""


class WorkerRegistry:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self.table_name = table_name

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkerRegistry:
        from ferrymq.aws import session

        return cls(session.client("dynamodb", settings), settings.workers_table)

    def heartbeat(
        self,
        worker_id: str,
        cluster: str,
        host: str,
        port: int,
        now_ms: int,
        state: WorkerState,
        *,
        started_at_ms: int | None = None,
        admin: tuple[str, int] | None = None,
    ) -> WorkerInfo:
        """Record that the worker is alive at ``now_ms``, creating its item on the first beat; the item as it
        is now comes back, so a worker learns from its heartbeat that it is leaving.

        ``started_at_ms`` is when the worker process started; without it the item's first heartbeat stands
        for that. A worker marked leaving stays leaving whatever ``state`` its heartbeat names. ``admin`` is
        where the worker's admin HTTP listener is.
        """
        if not worker_id or worker_id.startswith(RESERVED_PREFIX):
            raise ValueError(f"worker ids are non-empty and do not start with {RESERVED_PREFIX!r}: {worker_id!r}")
        if not 0 < port < 65536:
            raise ValueError(f"not a port: {port}")
        values: dict[str, Any] = {
            ":h": {"S": host},
            ":p": {"N": str(port)},
            ":now": {"N": str(now_ms)},
            ":s": {"S": WorkerState(state).value},
        }
        if started_at_ms is None:
            started = "if_not_exists(#st, :now)"
        else:
            started = ":st"
            values[":st"] = {"N": str(started_at_ms)}
        names = {"#h": "host", "#p": "port", "#hb": "heartbeat_at", "#s": "state", "#st": "started_at"}
        update = f"SET #h = :h, #p = :p, #hb = :now, #st = {started}"
        if admin is not None:
            names["#a"] = "admin"
            values[":a"] = {"S": f"{admin[0]}:{admin[1]}"}
            update += ", #a = :a"
        with _translated():
            try:
                resp = self._client.update_item(
                    TableName=self.table_name,
                    Key=_key(cluster, worker_id),
                    UpdateExpression=f"{update}, #s = :s",
                    # One write in the usual case; only a beat of a worker marked leaving needs a second.
                    ConditionExpression="attribute_not_exists(#s) OR #s <> :leaving OR :s = :leaving",
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues={**values, ":leaving": {"S": WorkerState.LEAVING.value}},
                    ReturnValues="ALL_NEW",
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
                del values[":s"]
                names.pop("#s")
                resp = self._client.update_item(
                    TableName=self.table_name,
                    Key=_key(cluster, worker_id),
                    UpdateExpression=update,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                    ReturnValues="ALL_NEW",
                )
        return _decode(resp["Attributes"])

    def set_state(self, cluster: str, worker_id: str, state: WorkerState) -> WorkerInfo | None:
        """Put a known worker in ``state`` (an operator marks it leaving, or takes it back); None for a worker
        the cluster never heard of, whose item is not created."""
        with _translated():
            try:
                resp = self._client.update_item(
                    TableName=self.table_name,
                    Key=_key(cluster, worker_id),
                    UpdateExpression="SET #s = :s",
                    ConditionExpression="attribute_exists(#hb)",
                    ExpressionAttributeNames={"#s": "state", "#hb": "heartbeat_at"},
                    ExpressionAttributeValues={":s": {"S": WorkerState(state).value}},
                    ReturnValues="ALL_NEW",
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    return None
                raise
        return _decode(resp["Attributes"])

    def get(self, cluster: str, worker_id: str) -> WorkerInfo | None:
        with _translated():
            resp = self._client.get_item(TableName=self.table_name, Key=_key(cluster, worker_id), ConsistentRead=True)
        item = resp.get("Item")
        return _decode(item) if item else None

    def members(self, cluster: str, now_ms: int, grace_ms: int) -> tuple[list[WorkerInfo], list[WorkerInfo]]:
        """The cluster's workers as ``(alive, dead)``, each ordered by worker id.

        Dead means no heartbeat for more than ``grace_ms``; a worker that left is in neither list.
        """
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "ConsistentRead": True,
            "KeyConditionExpression": "#c = :c",
            "ExpressionAttributeNames": {"#c": "cluster"},
            "ExpressionAttributeValues": {":c": {"S": cluster}},
        }
        alive: list[WorkerInfo] = []
        dead: list[WorkerInfo] = []
        with _translated():
            while True:
                resp = self._client.query(**kwargs)
                for item in resp.get("Items", []):
                    if item["worker_id"]["S"].startswith(RESERVED_PREFIX):
                        continue
                    worker = _decode(item)
                    (alive if heartbeat_fresh(worker.heartbeat_at, now_ms, grace_ms) else dead).append(worker)
                last = resp.get("LastEvaluatedKey")
                if not last:
                    break
                kwargs["ExclusiveStartKey"] = last
        return alive, dead

    def hold_manager_lease(self, cluster: str, worker_id: str, now_ms: int, lease_ms: int) -> bool:
        """Take or renew the cluster's manager lease (item ``#manager``) for ``lease_ms``; False while another
        worker's lease is live. Whoever holds it acts as the in-cluster manager."""
        with _translated():
            try:
                self._client.update_item(
                    TableName=self.table_name,
                    Key=_key(cluster, MANAGER_ITEM),
                    UpdateExpression="SET #h = :me, #u = :until",
                    ConditionExpression="attribute_not_exists(#u) OR #u < :now OR #h = :me",
                    ExpressionAttributeNames={"#h": "holder", "#u": "lease_until"},
                    ExpressionAttributeValues={
                        ":me": {"S": worker_id},
                        ":now": {"N": str(now_ms)},
                        ":until": {"N": str(now_ms + lease_ms)},
                    },
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    return False
                raise
        return True

    def leave(self, cluster: str, worker_id: str) -> None:
        """Forget the worker: it left the cluster for good (a crashed worker is only dead, and stays listed)."""
        with _translated():
            self._client.delete_item(TableName=self.table_name, Key=_key(cluster, worker_id))


def _key(cluster: str, worker_id: str) -> dict[str, Any]:
    return {"cluster": {"S": cluster}, "worker_id": {"S": worker_id}}


def _decode(item: dict[str, Any]) -> WorkerInfo:
    return WorkerInfo(
        worker_id=item["worker_id"]["S"],
        cluster=item["cluster"]["S"],
        host=item["host"]["S"],
        port=int(item["port"]["N"]),
        heartbeat_at=int(item["heartbeat_at"]["N"]),
        started_at=int(item["started_at"]["N"]),
        state=WorkerState(item["state"]["S"]),
        admin=item["admin"]["S"] if "admin" in item else None,
    )


def _translated() -> AbstractContextManager[None]:
    return outages_or_internal("worker registry call", log)
