"""Queue catalog: the rules of creating, changing and deleting queues, and a cache for lookups.

The cache only ever holds live records and is dropped for a name whenever this process writes it, so a
warm request makes no DynamoDB call.  Other front ends see a change within ``ttl`` seconds, which is how
SQS itself describes attribute propagation (up to 60 s).
"""

from __future__ import annotations

import asyncio
import re
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TypeVar

from ferrymq.aws.queue_store import QueueRecord, QueueStore, StaleQueueRecord
from ferrymq.clock import Clock
from ferrymq.errors import (
    InvalidAttributeValue,
    InvalidParameterValue,
    PurgeQueueInProgress,
    QueueDeletedRecently,
    QueueDoesNotExist,
    QueueNameExists,
    UnsupportedOperation,
)
from functions.metadata import queue_attributes

T = TypeVar("T")

QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
DELETE_COOLDOWN_SECONDS = 60.0
PURGE_COOLDOWN_SECONDS = 60.0
_WRITE_RETRIES = 5


def check_queue_name(name: str) -> None:
    if not QUEUE_NAME.match(name):
        raise InvalidParameterValue(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"
        )


class QueueCatalog:
    def __init__(self, store: QueueStore, clock: Clock, *, partitions: int, ttl: float, max_entries: int = 10_000,
                 ) -> None:
        self._store = store
        self._clock = clock
        self._partitions = partitions
        self._ttl = ttl
        self._max_entries = max_entries
        self._cache: OrderedDict[tuple[str, str], tuple[float, QueueRecord]] = OrderedDict()

    async def _io(self, fn: Callable[..., T], *args: object) -> T:
        # boto3 is blocking; a cache miss must not stall every other request on the event loop.
        return await asyncio.to_thread(fn, *args)

    # --- lookups ---------------------------------------------------------------------------------------

    async def get(self, account: str, name: str) -> QueueRecord:
        """The live queue ``name`` of ``account``; QueueDoesNotExist when there is none."""
        key = (account, name)
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self._clock.monotonic():
            return hit[1]
        record = await self._io(self._store.get, account, name)
        if record is None or not record.live:
            self._cache.pop(key, None)
            raise QueueDoesNotExist()
        self._remember(record)
        return record

    def invalidate(self, account: str, name: str) -> None:
        self._cache.pop((account, name), None)

    def _remember(self, record: QueueRecord) -> None:
        key = (record.account, record.name)
        self._cache[key] = (self._clock.monotonic() + self._ttl, record)
        self._cache.move_to_end(key)
        while len(self._cache) > self._max_entries:
            self._cache.popitem(last=False)

    async def list(self, account: str, prefix: str, limit: int | None, start_after: str | None,
                   ) -> list[QueueRecord]:
        return await self._io(self._store.list, account, prefix, limit, start_after)

    # --- writes ----------------------------------------------------------------------------------------

    async def create(self, account: str, name: str, attributes: Mapping[str, str], tags: Mapping[str, str],
                     ) -> QueueRecord:
        """Create ``name``, or return the existing queue when its attributes are the same ones asked for."""
        check_queue_name(name.removesuffix(".fifo") if name.endswith(".fifo") else name)
        fifo = name.endswith(".fifo")
        wanted = queue_attributes.check_settable(attributes, fifo=fifo)
        if fifo or wanted.get("FifoQueue") == "true":
            raise UnsupportedOperation("FIFO queues are not available on this endpoint yet.")
        for _ in range(_WRITE_RETRIES):
            existing = await self._io(self._store.get, account, name)
            now = self._clock.now()
            if existing is not None and existing.live:
                if not _same_attributes(existing.attributes, wanted):
                    raise QueueNameExists(
                        "A queue already exists with the same name and a different value for attribute(s) "
                        + ", ".join(sorted(_differing(existing.attributes, wanted)))
                    )
                self._remember(existing)
                return existing
            recently_deleted = existing is not None and existing.deleted_at is not None and (
                now - existing.deleted_at < DELETE_COOLDOWN_SECONDS
            )
            if recently_deleted:
                raise QueueDeletedRecently()
            queue_id = uuid.uuid4().hex
            record = QueueRecord(
                account=account,
                name=name,
                queue_id=queue_id,
                partition=zlib.crc32(queue_id.encode()) % self._partitions,
                attributes=wanted,
                tags=dict(tags),
                created_at=int(now),
                modified_at=int(now),
                version=(existing.version + 1) if existing is not None else 0,
            )
            try:
                await self._io(self._store.put_new, record, existing)
            except StaleQueueRecord:
                continue
            self._remember(record)
            return record
        raise QueueNameExists()

    async def set_attributes(self, account: str, name: str, attributes: Mapping[str, str]) -> QueueRecord:
        def change(record: QueueRecord) -> QueueRecord:
            fifo = record.name.endswith(".fifo")
            wanted = queue_attributes.check_settable(attributes, fifo=fifo)
            if "FifoQueue" in wanted and (wanted["FifoQueue"] == "true") != fifo:
                raise InvalidAttributeValue("Invalid value for the parameter FifoQueue.")
            merged = {**record.attributes, **wanted}
            return record.evolve(attributes=merged, modified_at=int(self._clock.now()))

        return await self._update(account, name, change)

    async def delete(self, account: str, name: str) -> QueueRecord:
        """Tombstone the queue; returns the deleted record so its messages can be dropped."""
        return await self._update(account, name, lambda r: r.evolve(deleted_at=self._clock.now()))

    async def mark_purged(self, account: str, name: str) -> QueueRecord:
        def change(record: QueueRecord) -> QueueRecord:
            now = self._clock.now()
            if record.purged_at is not None and now - record.purged_at < PURGE_COOLDOWN_SECONDS:
                raise PurgeQueueInProgress(
                    f"Only one PurgeQueue operation on {name} is allowed every 60 seconds."
                )
            return record.evolve(purged_at=now)

        return await self._update(account, name, change)

    async def _update(self, account: str, name: str, change: Callable[[QueueRecord], QueueRecord]) -> QueueRecord:
        self.invalidate(account, name)
        for _ in range(_WRITE_RETRIES):
            current = await self._io(self._store.get, account, name)
            if current is None or not current.live:
                raise QueueDoesNotExist()
            new = change(current)
            try:
                await self._io(self._store.replace, current, new)
            except StaleQueueRecord:
                continue
            stored = new.evolve(version=current.version + 1)
            if stored.live:
                self._remember(stored)
            return stored
        raise QueueDoesNotExist()


def _effective(attributes: Mapping[str, str]) -> dict[str, str]:
    return {**queue_attributes.DEFAULTS, **attributes}


def _same_attributes(stored: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    return not _differing(stored, wanted)


def _differing(stored: Mapping[str, str], wanted: Mapping[str, str]) -> set[str]:
    have = _effective(stored)
    return {name for name, value in wanted.items() if have.get(name) != value}
