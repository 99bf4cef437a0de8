"""The event-source mappings table (``<prefix>event-source-mappings``, declared in template.yaml).

Key schema: ``account`` (HASH), ``id`` (RANGE). Two kinds of item share it:

- ``m#<uuid>``: a mapping: its configuration (:class:`~ferrymq.push.mapping.MappingConfig`), ``version`` (moved by
  every change; changes are conditional on the version they read), ``last_modified``, ``last_result`` and, for
  HTTP targets, ``secret``: the signing secret sealed by :class:`~ferrymq.aws.secret_box.SecretBox` and bound to
  the mapping, so neither the table nor a scan of it holds it in the clear. Push hosts add their lease attributes
  (``lease_*``) to the same item; the API's writes never touch them.
- ``g#<sha256(queue arn, target)>``: a guard naming the mapping of that queue and target, written and removed in
  the same transaction as the mapping, so two mappings of one queue and target cannot exist however requests race.

Push hosts also write one heartbeat item each under the account ``~push-hosts`` (:mod:`.mapping_leases`).

A caller's mappings are one Query; every call here is blocking boto3 and runs off the event loop.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ferrymq.aws import session
from ferrymq.aws.errors import translate_client_errors
from ferrymq.aws.secret_box import SecretBox
from ferrymq.push.mapping import MappingConfig
from ferrymq.settings import Settings

TABLE_SUFFIX = "event-source-mappings"
MAPPING_PREFIX = "m#"
GUARD_PREFIX = "g#"
SECRET_PREFIX = "fmqs_"


def table_name(settings: Settings) -> str:
    return f"{settings.table_prefix}{TABLE_SUFFIX}"


@dataclass(frozen=True, slots=True)
class Mapping:
    account: str
    uuid: str
    config: MappingConfig
    version: int
    last_modified: float
    last_result: str = "No records processed"


class TargetTaken(Exception):
    """Another mapping of the same queue and target exists: ``uuid`` is its UUID."""

    def __init__(self, uuid: str) -> None:
        super().__init__(uuid)
        self.uuid = uuid


class Changed(Exception):
    """The mapping changed (or went) since it was read."""


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def _bound(mapping_uuid: str) -> str:
    return f"event-source-mapping:{mapping_uuid}"


def _guard_id(config: MappingConfig) -> str:
    digest = hashlib.sha256(f"{config.queue_arn}\0{config.target}".encode()).hexdigest()
    return GUARD_PREFIX + digest


class MappingStore:
    def __init__(self, client: Any, table: str, box: SecretBox | None = None) -> None:
        self._client = client
        self._table = table
        self._box = box or SecretBox.for_region(client.meta.region_name)

    @property
    def client(self) -> Any:
        """The DynamoDB client (the push service's leases share it)."""
        return self._client

    @classmethod
    def from_settings(cls, settings: Settings) -> MappingStore:
        return cls(session.client("dynamodb", settings), table_name(settings),
                   SecretBox(session.client("kms", settings)))

    def create(self, account: str, config: MappingConfig) -> tuple[Mapping, str | None]:
        """A new mapping and, for an HTTP target, its signing secret (returned here only). Raises TargetTaken."""
        mapping = Mapping(account, str(uuid.uuid4()), config, 1, time.time())
        secret = new_secret() if config.url else None
        item = _to_item(mapping)
        if secret is not None:
            item["secret"] = {"B": self._box.seal(secret, _bound(mapping.uuid))}
        guard = self._guard_put(account, config, mapping.uuid)
        put = {"Put": {"TableName": self._table, "Item": item, "ConditionExpression": "attribute_not_exists(#id)",
                       "ExpressionAttributeNames": {"#id": "id"}}}
        self._transact([guard, put], lambda: self._taken(account, config))
        return mapping, secret

    def get(self, account: str, mapping_uuid: str) -> Mapping | None:
        with translate_client_errors():
            item = self._client.get_item(TableName=self._table, Key=key(account, MAPPING_PREFIX + mapping_uuid),
                                         ConsistentRead=True).get("Item")
        return from_item(item) if item else None

    def list(self, account: str) -> list[Mapping]:
        """The account's mappings, ordered by UUID."""
        return sorted(self._query(account), key=lambda m: m.uuid)

    def _query(self, account: str) -> Iterator[Mapping]:
        with translate_client_errors():
            for page in self._client.get_paginator("query").paginate(
                TableName=self._table, ConsistentRead=True,
                KeyConditionExpression="#a = :a AND begins_with(#id, :m)",
                ExpressionAttributeNames={"#a": "account", "#id": "id"},
                ExpressionAttributeValues={":a": {"S": account}, ":m": {"S": MAPPING_PREFIX}},
            ):
                for item in page.get("Items", []):
                    yield from_item(item)

    def update(self, old: Mapping, config: MappingConfig) -> Mapping:
        """``old`` changed to ``config``; raises Changed if it changed since read, TargetTaken for a taken target."""
        new = Mapping(old.account, old.uuid, config, old.version + 1, time.time(), old.last_result)
        item = _to_item(new)
        names = {f"#{k}": k for k in item if k not in ("account", "id")}
        values = {f":{k}": v for k, v in item.items() if k not in ("account", "id")}
        values[":seen"] = {"N": str(old.version)}
        removed = [k for k in _OPTIONAL if k not in item]
        expression = "SET " + ", ".join(f"#{k} = :{k}" for k in item if k not in ("account", "id"))
        if removed:
            expression += " REMOVE " + ", ".join(f"#{k}" for k in removed)
            names.update({f"#{k}": k for k in removed})
        change = {"Update": {"TableName": self._table, "Key": key(old.account, MAPPING_PREFIX + old.uuid),
                             "UpdateExpression": expression, "ConditionExpression": "#version = :seen",
                             "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}}
        if _guard_id(old.config) == _guard_id(config):
            self._transact([change], lambda: None)
            return new
        moves = [self._guard_delete(old), self._guard_put(old.account, config, old.uuid), change]
        self._transact(moves, lambda: self._taken(old.account, config))
        return new

    def delete(self, old: Mapping) -> None:
        """Remove ``old`` and its guard; raises Changed if it changed since read."""
        delete = {"Delete": {"TableName": self._table, "Key": key(old.account, MAPPING_PREFIX + old.uuid),
                             "ConditionExpression": "#version = :seen",
                             "ExpressionAttributeNames": {"#version": "version"},
                             "ExpressionAttributeValues": {":seen": {"N": str(old.version)}}}}
        self._transact([delete, self._guard_delete(old)], lambda: None)

    def rotate_secret(self, old: Mapping) -> tuple[Mapping, str]:
        """A new signing secret for ``old`` (an HTTP mapping), returned here only; raises Changed if it changed
        since read. The version moves, so the push host delivering it restarts its poller with the new secret."""
        secret = new_secret()
        new = Mapping(old.account, old.uuid, old.config, old.version + 1, time.time(), old.last_result)
        change = {"Update": {
            "TableName": self._table, "Key": key(old.account, MAPPING_PREFIX + old.uuid),
            "UpdateExpression": "SET #secret = :secret, #version = :version, #modified = :modified",
            "ConditionExpression": "#version = :seen",
            "ExpressionAttributeNames": {"#secret": "secret", "#version": "version", "#modified": "last_modified"},
            "ExpressionAttributeValues": {":secret": {"B": self._box.seal(secret, _bound(old.uuid))},
                                          ":version": {"N": str(new.version)}, ":seen": {"N": str(old.version)},
                                          ":modified": {"N": repr(new.last_modified)}}}}
        self._transact([change], lambda: None)
        return new, secret

    def secret_of(self, account: str, mapping_uuid: str) -> str | None:
        """The signing secret of an HTTP mapping, opened (for the push service)."""
        with translate_client_errors():
            item = self._client.get_item(TableName=self._table, Key=key(account, MAPPING_PREFIX + mapping_uuid),
                                         ConsistentRead=True, ProjectionExpression="secret").get("Item")
        if not item or "secret" not in item:
            return None
        return self._box.open(item["secret"]["B"], _bound(mapping_uuid))

    def _guard_put(self, account: str, config: MappingConfig, mapping_uuid: str) -> dict[str, Any]:
        return {"Put": {"TableName": self._table, "ConditionExpression": "attribute_not_exists(#id)",
                        "ExpressionAttributeNames": {"#id": "id"},
                        "Item": {**key(account, _guard_id(config)), "uuid": {"S": mapping_uuid}}}}

    def _guard_delete(self, old: Mapping) -> dict[str, Any]:
        return {"Delete": {"TableName": self._table, "Key": key(old.account, _guard_id(old.config))}}

    def _taken(self, account: str, config: MappingConfig) -> None:
        with translate_client_errors():
            item = self._client.get_item(TableName=self._table, Key=key(account, _guard_id(config)),
                                         ConsistentRead=True).get("Item")
        raise TargetTaken(item["uuid"]["S"] if item else "")

    def _transact(self, items: list[dict[str, Any]], on_guard: Any) -> None:
        """Write ``items`` at once; a failed guard put calls ``on_guard`` (which raises), any other failed
        condition raises Changed."""
        try:
            with translate_client_errors():
                self._client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
            for item, reason in zip(items, reasons, strict=False):
                if reason == "ConditionalCheckFailed" and "Put" in item and \
                        item["Put"]["Item"]["id"]["S"].startswith(GUARD_PREFIX):
                    on_guard()
            if "ConditionalCheckFailed" in reasons:
                raise Changed() from None
            raise


_OPTIONAL = ("function_arn", "url", "max_concurrency", "filters")


def key(account: str, item_id: str) -> dict[str, Any]:
    return {"account": {"S": account}, "id": {"S": item_id}}


def _to_item(m: Mapping) -> dict[str, Any]:
    c = m.config
    item: dict[str, Any] = {
        **key(m.account, MAPPING_PREFIX + m.uuid),
        "uuid": {"S": m.uuid},
        "queue_arn": {"S": c.queue_arn},
        "batch_size": {"N": str(c.batch_size)},
        "window_seconds": {"N": str(c.window_seconds)},
        "report_failures": {"BOOL": c.report_failures},
        "enabled": {"BOOL": c.enabled},
        "version": {"N": str(m.version)},
        "last_modified": {"N": repr(m.last_modified)},
        "last_result": {"S": m.last_result},
    }
    if c.function_arn is not None:
        item["function_arn"] = {"S": c.function_arn}
    if c.url is not None:
        item["url"] = {"S": c.url}
    if c.max_concurrency is not None:
        item["max_concurrency"] = {"N": str(c.max_concurrency)}
    if c.filters:
        item["filters"] = {"L": [{"S": p} for p in c.filters]}
    return item


def from_item(item: dict[str, Any]) -> Mapping:
    config = MappingConfig(
        queue_arn=item["queue_arn"]["S"],
        function_arn=item["function_arn"]["S"] if "function_arn" in item else None,
        url=item["url"]["S"] if "url" in item else None,
        batch_size=int(item["batch_size"]["N"]),
        window_seconds=int(item["window_seconds"]["N"]),
        report_failures=item["report_failures"]["BOOL"],
        max_concurrency=int(item["max_concurrency"]["N"]) if "max_concurrency" in item else None,
        filters=tuple(p["S"] for p in item.get("filters", {}).get("L", [])),
        enabled=item["enabled"]["BOOL"],
    )
    return Mapping(item["account"]["S"], item["uuid"]["S"], config, int(item["version"]["N"]),
                   float(item["last_modified"]["N"]), item["last_result"]["S"])
