"""The queue catalog in DynamoDB.

Table ``settings.queues_table``, one item per queue name and namespace (owning account and region)::

    account (S, hash key)     the namespace: the owning account id for queues of the home region (the region
                              the catalog is told is its own: every queue made before regions lives there, so
                              their items need no migration), "<account>:<region>" for queues of any other
                              region; ListQueues reads one namespace, so regions never see each other's queues
    name (S, range key)       queue name; ListQueues' prefix search is a Query with begins_with(name)
    queue_id (S)              identity of this incarnation; a queue deleted and created again gets a new one,
                              so storage workers never mix the messages of the two
    partition (N)             storage partition holding the queue's messages, fixed at creation
    cluster (S, optional)     the storage cluster the partition belongs to, when the out-cluster manager placed
                              the queue (its capacity count is given back on delete); absent for queues placed
                              by a hash over a fixed number of partitions
    shards (L of M, optional) a queue spread over several partitions (``FerryMQShardCount``): its shards after
                              the first (which is ``partition``/``cluster``), each {partition (N), cluster (S)?}
    attributes (M of S)       settable attributes, in SQS's string form
    tags (M of S)
    created_at, modified_at (N)   seconds since the epoch
    purged_at (N, optional)   last PurgeQueue, for the 60-second PurgeQueueInProgress rule, and to tell the
                              deduplication ids claimed before it (forgotten by the purge) from later ones
    deleted_at (N, optional)  tombstone: kept so a create within 60 s can answer QueueDeletedRecently
    expires_at (N, optional)  tombstones only: deleted_at + TOMBSTONE_LIFETIME_SECONDS, the table's TTL
                              attribute, so deleted names do not pile up (a read past it sees no queue, as
                              it would once DynamoDB deleted the item; pending drops never carry it)
    version (N)               bumped by every write; writes are conditional on it

Pending drops live in the same table, under the pseudo-account ``#drops`` (real accounts are 12 digits, so no
caller's Query can name it), one item per deleted queue whose messages a storage worker still has to drop::

    account (S, hash key)     "#drops"
    name (S, range key)       "<partition, zero-padded to 6 digits>#<queue_id>": a worker reads its partition's
                              items with one Query, begins_with(name, "<partition>#")
    queue_id (S)              the deleted incarnation
    partition (N)             the partition whose worker holds its messages
    queue_account (S), queue_name (S)   the deleted queue, for the operator reading the table
    deleted_at (N)            when DeleteQueue ran; also makes the item read as a tombstone should anything
                              ever read it as a queue record, so it can never show up as a live queue

Each account's count of queues and shards, for its limits, lives under the pseudo-account ``#usage``
(:mod:`ferrymq.aws.account_usage`).

DeleteQueue writes the tombstone and one pending drop per shard in one transaction, so a deleted queue always leaves
an item its worker will act on, whether or not the worker could be told at once.  Whoever drops the id in
the worker (the front end after a successful drop call, or the worker's own sweep) deletes the item.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from ferrymq.aws.errors import translate_client_errors
from ferrymq.errors import ServiceUnavailable

DROPS_ACCOUNT = "#drops"
"""The pseudo-account holding pending drops; a real account id is 12 digits and can never equal it."""

_PARTITION_DIGITS = 6
# Reasons a transaction was cancelled that mean "read again and retry", as for a failed conditional put.
_LOST_RACE_REASONS = frozenset({"ConditionalCheckFailed", "TransactionConflict"})
# Reasons that are an outage, as the same codes are for a single write (see ferrymq.aws.errors).
_OUTAGE_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"})


TOMBSTONE_LIFETIME_SECONDS = 3600
"""How long a deleted queue's tombstone outlives it: well past the 60 s QueueDeletedRecently window."""


class StaleQueueRecord(Exception):
    """A conditional write lost a race: the record changed since it was read."""


def namespace(account: str, region: str | None) -> str:
    """The hash key of ``account``'s queues in ``region`` (None: the home region)."""
    return account if region is None else f"{account}:{region}"


@dataclass(frozen=True, slots=True)
class QueueRecord:
    account: str
    name: str
    queue_id: str
    partition: int
    region: str | None = None
    cluster: str | None = None
    """The storage cluster the queue was placed on; None when placed by a hash over a fixed partition count."""
    """The queue's region; None for the home region (see the module docstring)."""
    attributes: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    created_at: int = 0
    modified_at: int = 0
    purged_at: float | None = None
    deleted_at: float | None = None
    version: int = 0
    more_shards: tuple[Shard, ...] = ()
    """The shards after the first, for a queue spread over several partitions."""
    shards: tuple[Shard, ...] = field(init=False, repr=False, compare=False)
    """Every shard of the queue, the first being ``partition`` and ``cluster``: made once, as every message
    request reads it, several times."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "shards", (Shard(self.partition, self.cluster), *self.more_shards))

    @property
    def live(self) -> bool:
        return self.deleted_at is None

    def storage_id(self, index: int) -> str:
        """The id shard ``index``'s messages are kept under by its storage worker: the queue id for the first,
        so a queue that grows keeps its messages, and a distinct one for each other, so that two shards on one
        partition never share a state."""
        return self.queue_id if index == 0 else f"{self.queue_id}#{index}"

    def evolve(self, **changes: Any) -> QueueRecord:
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class Shard:
    """One partition of a queue's messages, and the storage cluster it belongs to (None: placed by hash)."""

    partition: int
    cluster: str | None = None


@dataclass(frozen=True, slots=True)
class PendingDrop:
    """A deleted queue whose messages the worker of ``partition`` has not yet been known to drop."""

    partition: int
    queue_id: str
    account: str
    name: str
    deleted_at: float


class QueueStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def get(self, account: str, name: str, region: str | None = None) -> QueueRecord | None:
        """The record for ``name`` (of ``region``, None: the home region), tombstones included."""
        if account == DROPS_ACCOUNT:
            # Pending drops are no queue, whoever asks (see the module docstring).
            return None
        with translate_client_errors():
            item = self._client.get_item(
                TableName=self._table, Key=_key(namespace(account, region), name), ConsistentRead=True
            ).get("Item")
        return _from_item(item) if item else None

    def list(self, account: str, prefix: str = "", limit: int | None = None, start_after: str | None = None,
             region: str | None = None) -> list[QueueRecord]:
        """Live queues of ``account`` in ``region`` whose names start with ``prefix``, in name order."""
        if account == DROPS_ACCOUNT:
            # Pending drops are no queue, whoever asks (see the module docstring).
            return []
        account = namespace(account, region)
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "ConsistentRead": True,
            "ExpressionAttributeNames": {"#a": "account"},
        }
        values: dict[str, Any] = {":a": {"S": account}}
        condition = "#a = :a"
        if prefix:
            condition += " AND begins_with(#n, :p)"
            kwargs["ExpressionAttributeNames"]["#n"] = "name"
            values[":p"] = {"S": prefix}
        kwargs["KeyConditionExpression"] = condition
        kwargs["ExpressionAttributeValues"] = values
        if start_after:
            kwargs["ExclusiveStartKey"] = _key(account, start_after)
        out: list[QueueRecord] = []
        with translate_client_errors():
            while True:
                page = self._client.query(**kwargs)
                for item in page.get("Items", []):
                    record = _from_item(item)
                    if record.live:
                        out.append(record)
                        if limit is not None and len(out) >= limit:
                            return out
                if "LastEvaluatedKey" not in page:
                    return out
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def scan(self, limit: int, start: dict[str, Any] | None = None) -> tuple[list[QueueRecord], dict[str, Any] | None]:
        """Live queues of every account and region, in no particular order, from at most ``limit`` items read
        where ``start`` (the second value of the call before) left off; the second value is None once the
        table has been read to its end. For whoever watches every queue (the metrics collector)."""
        kwargs: dict[str, Any] = {"TableName": self._table, "Limit": max(1, limit)}
        if start:
            kwargs["ExclusiveStartKey"] = start
        with translate_client_errors():
            page = self._client.scan(**kwargs)
        records = [
            record
            for item in page.get("Items", [])
            # Pseudo-accounts (#drops, and #usage of ferrymq.aws.account_usage) hold no queue.
            if not item["account"]["S"].startswith("#") and (record := _from_item(item)).live
        ]
        return records, page.get("LastEvaluatedKey")

    def put_new(self, record: QueueRecord, replacing: QueueRecord | None) -> None:
        """Write a new queue; ``replacing`` is the tombstone it overwrites, if any."""
        if replacing is None:
            condition = "attribute_not_exists(#n)"
            values: dict[str, Any] | None = None
        else:
            condition = "version = :v"
            values = {":v": {"N": str(replacing.version)}}
        self._conditional_put(record, condition, values)

    def replace(self, old: QueueRecord, new: QueueRecord) -> None:
        """Overwrite ``old`` with ``new`` unless someone else wrote in between."""
        self._conditional_put(new.evolve(version=old.version + 1), "version = :v", {":v": {"N": str(old.version)}})

    def tombstone(self, old: QueueRecord, deleted: QueueRecord) -> None:
        """Overwrite live ``old`` with its tombstone ``deleted`` and record a pending drop of its queue id, in one
        transaction: either both are written or, when someone else wrote ``old`` in between, neither is
        (StaleQueueRecord)."""
        stored = deleted.evolve(version=old.version + 1)
        if stored.deleted_at is None:
            raise ValueError("a tombstone needs deleted_at")
        transaction = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": _to_item(stored),
                    "ConditionExpression": "version = :v",
                    "ExpressionAttributeValues": {":v": {"N": str(old.version)}},
                }
            },
            *(
                {"Put": {"TableName": self._table, "Item": _drop_item(stored, index, stored.deleted_at)}}
                for index in range(len(stored.shards))
            ),
        ]
        with translate_client_errors():
            try:
                self._client.transact_write_items(TransactItems=transaction)
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "TransactionCanceledException":
                    raise
                reasons = {r.get("Code") for r in exc.response.get("CancellationReasons", [])}
                if reasons & _LOST_RACE_REASONS:
                    raise StaleQueueRecord(old.name) from exc
                if reasons & _OUTAGE_REASONS:
                    raise ServiceUnavailable() from exc
                raise

    def pending_drops(self, partition: int) -> list[PendingDrop]:
        """Every pending drop of ``partition``, read strongly consistent and across pages."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "ConsistentRead": True,
            "KeyConditionExpression": "#a = :a AND begins_with(#n, :p)",
            "ExpressionAttributeNames": {"#a": "account", "#n": "name"},
            "ExpressionAttributeValues": {":a": {"S": DROPS_ACCOUNT}, ":p": {"S": _drop_prefix(partition)}},
        }
        out: list[PendingDrop] = []
        with translate_client_errors():
            while True:
                page = self._client.query(**kwargs)
                out.extend(_drop_from_item(item) for item in page.get("Items", []))
                if "LastEvaluatedKey" not in page:
                    return out
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def clear_pending_drop(self, partition: int, queue_id: str) -> None:
        """Forget the pending drop of ``queue_id`` once its worker has dropped it durably (no-op when gone)."""
        with translate_client_errors():
            self._client.delete_item(TableName=self._table, Key=_key(DROPS_ACCOUNT, _drop_name(partition, queue_id)))

    def _conditional_put(self, record: QueueRecord, condition: str, values: dict[str, Any] | None) -> None:
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "Item": _to_item(record),
            "ConditionExpression": condition,
        }
        if "#n" in condition:
            kwargs["ExpressionAttributeNames"] = {"#n": "name"}
        if values:
            kwargs["ExpressionAttributeValues"] = values
        with translate_client_errors():
            try:
                self._client.put_item(**kwargs)
            except ClientError as exc:
                if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                    raise StaleQueueRecord(record.name) from exc
                raise


def _key(account: str, name: str) -> dict[str, Any]:
    return {"account": {"S": account}, "name": {"S": name}}


def _drop_prefix(partition: int) -> str:
    return f"{partition:0{_PARTITION_DIGITS}d}#"


def _drop_name(partition: int, queue_id: str) -> str:
    return _drop_prefix(partition) + queue_id


def _drop_item(r: QueueRecord, index: int, deleted_at: float) -> dict[str, Any]:
    partition, queue_id = r.shards[index].partition, r.storage_id(index)
    return {
        **_key(DROPS_ACCOUNT, _drop_name(partition, queue_id)),
        "queue_id": {"S": queue_id},
        "partition": {"N": str(partition)},
        "queue_account": {"S": r.account},
        "queue_name": {"S": r.name},
        "deleted_at": {"N": repr(deleted_at)},
    }


def _drop_from_item(item: dict[str, Any]) -> PendingDrop:
    return PendingDrop(
        partition=int(item["partition"]["N"]),
        queue_id=item["queue_id"]["S"],
        account=item["queue_account"]["S"],
        name=item["queue_name"]["S"],
        deleted_at=float(item["deleted_at"]["N"]),
    )


def _to_item(r: QueueRecord) -> dict[str, Any]:
    item: dict[str, Any] = {
        **_key(namespace(r.account, r.region), r.name),
        "queue_id": {"S": r.queue_id},
        "partition": {"N": str(r.partition)},
        "attributes": {"M": {k: {"S": v} for k, v in r.attributes.items()}},
        "tags": {"M": {k: {"S": v} for k, v in r.tags.items()}},
        "created_at": {"N": str(r.created_at)},
        "modified_at": {"N": str(r.modified_at)},
        "version": {"N": str(r.version)},
    }
    if r.cluster is not None:
        item["cluster"] = {"S": r.cluster}
    if r.more_shards:
        item["shards"] = {"L": [{"M": _shard_item(shard)} for shard in r.more_shards]}
    if r.purged_at is not None:
        item["purged_at"] = {"N": repr(r.purged_at)}
    if r.deleted_at is not None:
        item["deleted_at"] = {"N": repr(r.deleted_at)}
        item["expires_at"] = {"N": str(int(r.deleted_at) + TOMBSTONE_LIFETIME_SECONDS)}
    return item


def _from_item(item: dict[str, Any]) -> QueueRecord:
    account, _, region = item["account"]["S"].partition(":")
    return QueueRecord(
        account=account,
        region=region or None,
        name=item["name"]["S"],
        queue_id=item["queue_id"]["S"],
        partition=int(item["partition"]["N"]),
        cluster=item["cluster"]["S"] if "cluster" in item else None,
        attributes={k: v["S"] for k, v in item.get("attributes", {}).get("M", {}).items()},
        tags={k: v["S"] for k, v in item.get("tags", {}).get("M", {}).items()},
        created_at=int(item.get("created_at", {}).get("N", "0")),
        modified_at=int(item.get("modified_at", {}).get("N", "0")),
        purged_at=float(item["purged_at"]["N"]) if "purged_at" in item else None,
        deleted_at=float(item["deleted_at"]["N"]) if "deleted_at" in item else None,
        version=int(item.get("version", {}).get("N", "0")),
        more_shards=tuple(
            Shard(int(s["M"]["partition"]["N"]), s["M"]["cluster"]["S"] if "cluster" in s["M"] else None)
            for s in item.get("shards", {}).get("L", [])
        ),
    )


def _shard_item(shard: Shard) -> dict[str, Any]:
    item: dict[str, Any] = {"partition": {"N": str(shard.partition)}}
    if shard.cluster is not None:
        item["cluster"] = {"S": shard.cluster}
    return item
