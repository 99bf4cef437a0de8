"""Leases on event-source mappings, held by push hosts (docs/design/push-delivery.md, section 1).

They live on the mapping items of the mappings table (:mod:`.event_source_mappings`): ``lease_owner`` (a push
host's id), ``lease_until_ms`` (the holder's wall clock plus the lease) and ``lease_epoch``, moved by every claim.
Claims and renewals are conditional on the epoch read, so one host holds a mapping at a time whatever the clocks
say; a lease's expiry is judged by the claimer with an allowance for clock skew, and only decides when a claim is
tried, never what is stored twice (a receipt handle deletes only its own receive).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ferrymq.aws.errors import translate_client_errors
from ferrymq.metadata.event_source_mappings import MAPPING_PREFIX, Mapping, from_item, key

HOSTS_ACCOUNT = "~push-hosts"
"""The key under which push hosts write their heartbeat items (no account id starts with ``~``)."""


@dataclass(frozen=True, slots=True)
class Leased:
    mapping: Mapping
    owner: str | None
    until_ms: int
    epoch: int

    def free(self, now_ms: int, skew_ms: int) -> bool:
        return self.owner is None or self.until_ms + skew_ms < now_ms


class MappingLeases:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def scan(self) -> list[Leased]:
        """Every mapping with its lease."""
        return self.survey()[0]

    def survey(self) -> tuple[list[Leased], list[dict[str, Any]]]:
        """Every mapping with its lease, and every push host's heartbeat item (:meth:`hosts`), in one paged Scan
        (mappings are few)."""
        found: list[Leased] = []
        hosts: list[dict[str, Any]] = []
        with translate_client_errors():
            for page in self._client.get_paginator("scan").paginate(TableName=self._table, ConsistentRead=True):
                for item in page.get("Items", []):
                    if item["account"]["S"] == HOSTS_ACCOUNT:
                        hosts.append(_host(item))
                    elif item["id"]["S"].startswith(MAPPING_PREFIX):
                        found.append(Leased(from_item(item), item.get("lease_owner", {}).get("S"),
                                            int(item.get("lease_until_ms", {}).get("N", "0")),
                                            int(item.get("lease_epoch", {}).get("N", "0"))))
        return found, hosts

    def claim(self, seen: Leased, owner: str, until_ms: int) -> int | None:
        """Take ``seen``'s mapping for ``owner`` until ``until_ms``; its new epoch, or None if another change came
        first (another claim, a renewal, or the mapping's deletion)."""
        epoch = seen.epoch + 1
        if self._write(seen.mapping, "SET lease_owner = :o, lease_until_ms = :u, lease_epoch = :e",
                       "attribute_exists(#id) AND (attribute_not_exists(lease_epoch) OR lease_epoch = :seen)",
                       {":o": {"S": owner}, ":u": {"N": str(until_ms)}, ":e": {"N": str(epoch)},
                        ":seen": {"N": str(seen.epoch)}}):
            return epoch
        return None

    def renew(self, mapping: Mapping, owner: str, epoch: int, until_ms: int) -> bool:
        """Extend a held lease; False if it is no longer ``owner``'s at ``epoch`` (or the mapping is gone)."""
        return self._write(mapping, "SET lease_until_ms = :u",
                           "attribute_exists(#id) AND lease_epoch = :e AND lease_owner = :o",
                           {":o": {"S": owner}, ":u": {"N": str(until_ms)}, ":e": {"N": str(epoch)}})

    def release(self, mapping: Mapping, owner: str, epoch: int) -> bool:
        """Give a held lease up at once (a host stopping cleanly), so another host need not wait for expiry."""
        return self._write(mapping, "REMOVE lease_owner SET lease_until_ms = :u",
                           "attribute_exists(#id) AND lease_epoch = :e AND lease_owner = :o",
                           {":o": {"S": owner}, ":u": {"N": "0"}, ":e": {"N": str(epoch)}})

    def report(self, mapping: Mapping, owner: str, epoch: int, result: str) -> bool:
        """Set the mapping's LastProcessingResult, while the lease is held."""
        return self._write(mapping, "SET last_result = :r",
                           "attribute_exists(#id) AND lease_epoch = :e AND lease_owner = :o",
                           {":o": {"S": owner}, ":r": {"S": result}, ":e": {"N": str(epoch)}})

    def heartbeat(self, owner: str, metrics_url: str, now_ms: int) -> None:
        """Say push host ``owner`` lives, and where its metrics are."""
        with translate_client_errors():
            self._client.put_item(TableName=self._table, Item={
                **key(HOSTS_ACCOUNT, owner), "metrics_url": {"S": metrics_url}, "heartbeat_ms": {"N": str(now_ms)}})

    def hosts(self) -> list[dict[str, Any]]:
        """Every push host's item: ``owner``, ``metrics_url``, ``heartbeat_ms``."""
        with translate_client_errors():
            items = [i for page in self._client.get_paginator("query").paginate(
                TableName=self._table, KeyConditionExpression="#a = :h", ExpressionAttributeNames={"#a": "account"},
                ExpressionAttributeValues={":h": {"S": HOSTS_ACCOUNT}}) for i in page.get("Items", [])]
        return [_host(i) for i in items]

    def forget_host(self, owner: str) -> None:
        with translate_client_errors():
            self._client.delete_item(TableName=self._table, Key=key(HOSTS_ACCOUNT, owner))

    def _write(self, mapping: Mapping, update: str, condition: str, values: dict[str, Any]) -> bool:
        try:
            with translate_client_errors():
                self._client.update_item(TableName=self._table, Key=key(mapping.account, MAPPING_PREFIX + mapping.uuid),
                                         UpdateExpression=update, ConditionExpression=condition,
                                         ExpressionAttributeNames={"#id": "id"}, ExpressionAttributeValues=values)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True


def _host(item: dict[str, Any]) -> dict[str, Any]:
    return {"owner": item["id"]["S"], "metrics_url": item.get("metrics_url", {}).get("S", ""),
            "heartbeat_ms": int(item.get("heartbeat_ms", {}).get("N", "0"))}
