"""Deleting expired DynamoDB items, which moto never does: it stores a table's TTL setting and nothing more.

Without this, a long-running local stack would keep every FIFO deduplication item forever. FerryMQ never
relies on the deletion (real DynamoDB deletes expired items lazily, typically within days, and they show up
in reads until then), so this only keeps the stand-in's memory bounded.

Every ``interval_seconds`` the sweeper takes the time ``now`` and, with writes held off, lists the items of
every table with TTL enabled whose TTL attribute is a number below ``now`` (epoch seconds; an attribute of
another type never expires, as in DynamoDB). Then it deletes each one with a DeleteItem request that goes
through :meth:`DurableApp.handle` exactly as a client's request does, so the delete is journaled and
survives a restart. Each delete is conditional on the attribute still being below ``now``: an item a client
rewrote with a later expiry in the meantime stays, and replaying the record later gives the same outcome.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ferrymq.infra.standin.asgi_bridge import dynamodb_environ
from ferrymq.infra.standin.durable_app import DurableApp

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 60.0

_SWEEPER_KEY = "standin-ttl-sweeper"


@dataclass(frozen=True, slots=True)
class ExpiredItem:
    account: str
    region: str
    table: str
    key: dict[str, dict[str, Any]]
    ttl_attribute: str


def find_expired(now: float) -> list[ExpiredItem]:
    """Items of TTL-enabled tables whose TTL attribute is a number below ``now``, in every account and
    region. Reads moto's state directly: callers hold writes off meanwhile."""
    from moto.backends import get_backend

    expired: list[ExpiredItem] = []
    # dict.items: the backend registries' own accessors create backends on demand.
    for account, regions in dict.items(get_backend("dynamodb")):  # type: ignore[call-overload]
        for region, backend in dict.items(regions):
            for name, table in backend.tables.items():
                ttl = table.ttl
                attribute = ttl.get("AttributeName")
                if ttl.get("TimeToLiveStatus") != "ENABLED" or not attribute:
                    continue
                for item in _items(table):
                    value = item.attrs.get(attribute)
                    if value is None or value.type != "N":
                        continue
                    try:
                        expires_at = float(value.value)
                    except (TypeError, ValueError):
                        continue
                    if expires_at < now:
                        key = {table.hash_key_attr: item.hash_key.to_json()}
                        if table.range_key_attr is not None:
                            key[table.range_key_attr] = item.range_key.to_json()
                        expired.append(ExpiredItem(account, region, name, key, attribute))
    return expired


def _items(table: Any) -> Iterator[Any]:
    for by_hash in table.items.values():
        if table.range_key_attr is not None:
            yield from by_hash.values()
        else:
            yield by_hash


def delete_request(item: ExpiredItem, now: float) -> tuple[dict[str, Any], bytes]:
    """The WSGI environ and body of a DeleteItem for ``item``, conditional on it still being expired at ``now``,
    built the way the stand-in's HTTP front builds a client's."""
    body = json.dumps(
        {
            "TableName": item.table,
            "Key": item.key,
            "ConditionExpression": "#ttl < :now",
            "ExpressionAttributeNames": {"#ttl": item.ttl_attribute},
            "ExpressionAttributeValues": {":now": {"N": repr(now)}},
        }
    ).encode()
    environ = dynamodb_environ("DeleteItem", region=item.region, access_key=_SWEEPER_KEY, account=item.account)
    return environ, body


class TtlSweeper:
    """A thread that deletes expired items every ``interval_seconds`` until :meth:`stop`."""

    def __init__(
        self, durable: DurableApp, interval_seconds: float, wall_clock: Callable[[], float] = time.time
    ) -> None:
        if interval_seconds <= 0:
            raise ValueError("the sweep interval must be positive")
        self._durable = durable
        self._interval = interval_seconds
        self._wall_clock = wall_clock
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="standin-ttl-sweeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop and wait for a sweep under way to finish the delete it is making."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stopping.wait(self._interval):
            try:
                self.sweep()
            except Exception:
                log.exception("TTL sweep failed")

    def sweep(self) -> int:
        """Delete what has expired by now; returns how many items were deleted."""
        now = self._wall_clock()
        expired = self._durable.with_writes_held(lambda: find_expired(now))
        deleted = 0
        for item in expired:
            if self._stopping.is_set():
                break
            response = self._durable.handle(*delete_request(item, now))
            if response.ok:
                deleted += 1
            elif b"ConditionalCheckFailed" not in b"".join(response.body):
                log.warning("TTL sweep could not delete %s from %s: %s %s", item.key, item.table, response.status,
                            b"".join(response.body)[:200].decode("utf-8", "replace"))
        if deleted:
            log.info("TTL sweep deleted %d expired items", deleted)
        return deleted
