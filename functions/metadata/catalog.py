"""Queue catalog: the rules of creating, changing and deleting queues, and a cache for lookups.

The rules are SQS's: queue names and types (standard or FIFO), attribute values and the rules between them
(:mod:`ferrymq.metadata.queue_attributes`), dead-letter targets (same owner, region and type, and admitted by
the target's RedriveAllowPolicy), tags (:mod:`ferrymq.metadata.tags`) and the statements AddPermission keeps in
the queue policy (:mod:`ferrymq.metadata.policy`).  Every change is a conditional write on the record's version,
retried on the fresh record when another writer got there first.

Queues live per account and region: every method takes the queue's ``region``, None (or the catalog's own,
home region) for the home region (see :mod:`ferrymq.aws.queue_store` for how they are keyed).

The cache only ever holds live records and is dropped for a name whenever this process writes it, so a
warm request makes no DynamoDB call.  Other front ends see a change within ``ttl`` seconds, which is how
SQS itself describes attribute propagation (up to 60 s).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from ferrymq.arn import queue_arn
from ferrymq.aws.queue_store import QueueRecord, QueueStore, Shard, StaleQueueRecord
from ferrymq.bulkhead import Bulkhead, off_loop
from ferrymq.clock import Clock
from ferrymq.destinations import FIFO_SUFFIX, is_fifo
from ferrymq.errors import (
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidParameterValue,
    PurgeQueueInProgress,
    QueueDeletedRecently,
    QueueDoesNotExist,
    QueueNameExists,
)
from ferrymq.metadata import policy, queue_attributes, redrive
from ferrymq.metadata import tags as tag_rules
from ferrymq.metadata.account_quota import AccountQuota
from ferrymq.metadata.queue_attributes import SHARD_COUNT
from ferrymq.metadata.queue_placement import QueuePlacement
from ferrymq.ttl_cache import TtlCache

T = TypeVar("T")

QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
MAX_NAME_LENGTH = 80
DELETE_COOLDOWN_SECONDS = 60.0
PURGE_COOLDOWN_SECONDS = 60.0
_WRITE_RETRIES = 5


def check_queue_name(name: str, *, fifo: bool) -> None:
    """SQS's rules for a new queue's name: a FIFO queue's ends with ``.fifo``, a standard queue's has no dot."""
    if fifo:
        base = name.removesuffix(FIFO_SUFFIX)
        if base == name or len(name) > MAX_NAME_LENGTH or not QUEUE_NAME.match(base):
            raise InvalidParameterValue(
                "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must "
                "end with .fifo suffix and be 1 to 80 in length."
            )
    elif not QUEUE_NAME.match(name):
        raise InvalidParameterValue(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"
        )


class QueueCatalog:
    def __init__(self, store: QueueStore, clock: Clock, *, partitions: int, ttl: float, region: str,
                 max_entries: int = 10_000, placement: QueuePlacement | None = None,
                 bulkhead: Bulkhead | None = None, quota: AccountQuota | None = None) -> None:
        """``placement``: where new queues go; by default a hash over ``partitions``. ``bulkhead``: where the
        DynamoDB calls run (by default the event loop's default threads). ``quota``: each account's limits on
        queues and shards; None sets none."""
        self._store = store
        self.quota = quota
        self._bulkhead = bulkhead
        self._clock = clock
        self._placement = placement or QueuePlacement(None, clock, partitions=partitions)
        self._region = region
        self._cache: TtlCache[tuple[str, str | None, str], QueueRecord] = TtlCache(clock, ttl, max_entries)

    @property
    def placement(self) -> QueuePlacement:
        return self._placement

    @property
    def home_region(self) -> str:
        return self._region

    def region_of(self, queue: QueueRecord) -> str:
        return queue.region or self._region

    def _ns(self, region: str | None) -> str | None:
        """How the store names ``region``: None for the home region."""
        return None if region is None or region == self._region else region

    def arn(self, account: str, name: str, region: str | None = None) -> str:
        return queue_arn(region or self._region, account, name)

    def arn_of(self, queue: QueueRecord) -> str:
        return queue_arn(self.region_of(queue), queue.account, queue.name)

    async def _io(self, fn: Callable[..., T], *args: object) -> T:
        # boto3 is blocking; a cache miss must not stall every other request on the event loop.
        return await off_loop(self._bulkhead, fn, *args)

    # --- lookups ---------------------------------------------------------------------------------------

    async def get(self, account: str, name: str, region: str | None = None) -> QueueRecord:
        """The live queue ``name`` of ``account`` in ``region``; QueueDoesNotExist when there is none."""
        ns = self._ns(region)
        hit = self._cache.get((account, ns, name))
        if hit is not None:
            return hit
        record = await self._io(self._store.get, account, name, ns)
        if record is None or not record.live:
            raise QueueDoesNotExist()
        self._remember(record)
        return record

    def cached(self, account: str, name: str, region: str | None = None) -> QueueRecord | None:
        """The cached record of a queue, without any DynamoDB call (usage records read its SSE settings)."""
        return self._cache.get((account, self._ns(region), name))

    def invalidate(self, account: str, name: str, region: str | None = None) -> None:
        self._cache.pop((account, self._ns(region), name))

    def _remember(self, record: QueueRecord) -> None:
        self._cache.put((record.account, self._ns(record.region), record.name), record)

    async def list(self, account: str, prefix: str, limit: int | None, start_after: str | None,
                   region: str | None = None) -> list[QueueRecord]:
        return await self._io(self._store.list, account, prefix, limit, start_after, self._ns(region))

    async def held(self, account: str, regions: Iterable[str]) -> tuple[int, int]:
        """The live queues ``account`` holds in ``regions``, and their shards (a first count for its quota)."""
        queues = shards = 0
        # One region after the other: every region botocore knows is served by default, and reading them at once
        # would take every slot of the metadata bulkhead from the requests waiting for one.
        for region in regions:
            for record in await self._io(self._store.list, account, "", None, None, self._ns(region)):
                queues += 1
                shards += len(record.shards)
        return queues, shards

    async def scan(self, limit: int, start: dict[str, Any] | None) -> tuple[list[QueueRecord], dict[str, Any] | None]:
        """Live queues of every account and region, a page at a time (``QueueStore.scan``); bypasses the cache."""
        return await self._io(self._store.scan, limit, start)

    async def dead_letter_sources(self, account: str, name: str, limit: int, start_after: str | None,
                                  region: str | None = None) -> list[QueueRecord]:
        """Up to ``limit`` queues of ``account`` in ``region``, after ``start_after`` in name order, whose
        dead-letter queue is ``name``."""
        target = self.arn(account, name, region)
        sources: list[QueueRecord] = []
        for queue in await self.list(account, "", None, start_after, region):
            redrive_policy = redrive.stored_redrive_policy(queue.attributes)
            if redrive_policy is not None and redrive_policy.dead_letter_target_arn == target:
                sources.append(queue)
                if len(sources) >= limit:
                    break
        return sources

    # --- writes ----------------------------------------------------------------------------------------

    async def create(self, account: str, name: str, attributes: Mapping[str, str], tags: Mapping[str, str],
                     region: str | None = None) -> QueueRecord:
        """Create ``name`` in ``region``, or return the existing queue when its attributes are the same ones asked
        for."""
        ns = self._ns(region)
        fifo = str(attributes.get("FifoQueue", "")).lower() == "true"
        check_queue_name(name, fifo=fifo)
        wanted = queue_attributes.check_settable(attributes, fifo=fifo)
        initial = queue_attributes.combined({}, wanted, fifo=fifo)
        initial_tags = tag_rules.check_tags(tags, name, required=False)
        await self._check_dead_letter_target(account, name, wanted, attributes, ns)
        for _ in range(_WRITE_RETRIES):
            existing = await self._io(self._store.get, account, name, ns)
            now = self._clock.now()
            if existing is not None and existing.live:
                differing = queue_attributes.differing(existing.attributes, wanted, fifo=fifo)
                if differing:
                    raise QueueNameExists(
                        "A queue already exists with the same name and a different value for attribute "
                        + ", ".join(sorted(differing))
                    )
                self._remember(existing)
                return existing
            recently_deleted = existing is not None and existing.deleted_at is not None and (
                now - existing.deleted_at < DELETE_COOLDOWN_SECONDS
            )
            if recently_deleted:
                raise QueueDeletedRecently()
            queue_id = uuid.uuid4().hex
            count = _shard_count(initial)
            await self._take(account, queues=1, shards=count)
            try:
                placed = await self._placement.place_shards(queue_id, 0, count)
            except BaseException:
                await self._release(account, queues=1, shards=count)
                raise
            record = QueueRecord(
                account=account,
                name=name,
                region=ns,
                queue_id=queue_id,
                partition=placed[0].partition,
                cluster=placed[0].cluster,
                more_shards=tuple(placed[1:]),
                attributes=initial,
                tags=initial_tags,
                created_at=int(now),
                modified_at=int(now),
                version=(existing.version + 1) if existing is not None else 0,
            )
            try:
                await self._io(self._store.put_new, record, existing)
            except StaleQueueRecord:
                await self._placement.release(placed)
                await self._release(account, queues=1, shards=count)
                continue
            self._remember(record)
            return record
        raise QueueNameExists()

    async def _grown(self, account: str, name: str, wanted: Mapping[str, str], ns: str | None) -> list[Shard]:
        """The shards a SetQueueAttributes asking for more of them adds, placed (their room taken); a smaller
        count than the queue has is refused, since its messages would be stranded."""
        if SHARD_COUNT not in wanted:
            return []
        current = await self._io(self._store.get, account, name, ns)
        if current is None or not current.live:
            raise QueueDoesNotExist()
        have, asked = len(current.shards), int(wanted[SHARD_COUNT])
        if asked < have:
            raise InvalidAttributeValue(
                f"Invalid value for the parameter {SHARD_COUNT}. Reason: A queue's shard count can only grow "
                f"(it has {have})."
            )
        await self._take(account, queues=0, shards=asked - have)
        try:
            return await self._placement.place_shards(
                current.queue_id, have, asked - have, taken=[s.partition for s in current.shards]
            )
        except BaseException:
            await self._release(account, queues=0, shards=asked - have)
            raise

    async def _take(self, account: str, *, queues: int, shards: int) -> None:
        if self.quota is not None and (queues or shards):
            await self.quota.take(account, queues=queues, shards=shards)

    async def _release(self, account: str, *, queues: int, shards: int) -> None:
        if self.quota is not None:
            await self.quota.release(account, queues=queues, shards=shards)

    async def set_attributes(self, account: str, name: str, attributes: Mapping[str, str],
                             region: str | None = None) -> QueueRecord:
        fifo = is_fifo(name)
        wanted = queue_attributes.check_settable(attributes, fifo=fifo)
        if wanted.get("FifoQueue") == "false":
            raise InvalidAttributeValue(
                "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."
            )
        await self._check_dead_letter_target(account, name, wanted, attributes, self._ns(region))
        added = await self._grown(account, name, wanted, self._ns(region))
        expected = int(wanted[SHARD_COUNT]) - len(added) if added else None

        def change(record: QueueRecord) -> QueueRecord:
            merged = queue_attributes.combined(record.attributes, wanted, fifo=fifo)
            now = self._clock.now()
            changed = record.evolve(attributes=merged, modified_at=int(now))
            if added:
                if len(record.shards) != expected:
                    raise InvalidAttributeValue(
                        f"The queue's {SHARD_COUNT} changed meanwhile; send the request again."
                    )
                changed = changed.evolve(more_shards=(*record.more_shards, *added))
            return changed

        try:
            return await self._update(account, name, change, region=region)
        except BaseException:
            await self._placement.release(added)
            await self._release(account, queues=0, shards=len(added))
            raise

    async def _check_dead_letter_target(self, account: str, name: str, wanted: Mapping[str, str],
                                        sent: Mapping[str, str], ns: str | None) -> None:
        """SQS's checks of a RedrivePolicy against its target: the same account and region, an existing queue of
        the same type, whose RedriveAllowPolicy lets this queue use it."""
        if not wanted.get("RedrivePolicy"):
            return
        raw = sent["RedrivePolicy"]
        target = redrive.RedrivePolicy.from_json(wanted["RedrivePolicy"]).target
        if target.account != account:
            raise redrive.redrive_policy_error(raw, "Dead-letter target owner should be same as the source.")
        region = ns or self._region
        dlq = await self._io(self._store.get, target.account, target.name, ns) if target.region == region else None
        if dlq is None or not dlq.live:
            raise redrive.redrive_policy_error(raw, "Dead letter target does not exist.")
        if is_fifo(dlq.name) != is_fifo(name):
            # SQS reports this one as an attribute-name error, with the doubled full stop.
            raise InvalidAttributeName(
                f"Value {raw} for parameter RedrivePolicy is invalid. Reason: Dead-letter queue must be same type "
                "of queue as the source.."
            )
        allow = redrive.stored_redrive_allow_policy(dlq.attributes)
        source = self.arn(account, name, region)
        if allow is not None and not allow.permits(source):
            raise redrive.redrive_policy_error(
                raw, f"The RedriveAllowPolicy of the dead-letter target does not allow queue {source} to use it."
            )

    async def tag(self, account: str, name: str, new_tags: Mapping[str, str], region: str | None = None,
                  ) -> QueueRecord:
        checked = tag_rules.check_tags(new_tags, name, required=True)
        return await self._update(account, name, lambda r: r.evolve(tags=tag_rules.merged(r.tags, checked, name)),
                                  region=region)

    async def untag(self, account: str, name: str, keys: list[str], region: str | None = None) -> QueueRecord:
        dropped = set(tag_rules.check_tag_keys(keys))
        return await self._update(
            account, name, lambda r: r.evolve(tags={k: v for k, v in r.tags.items() if k not in dropped}),
            region=region,
        )

    async def add_permission(self, account: str, name: str, *, label: str, accounts: list[str], actions: list[str],
                             region: str | None = None) -> QueueRecord:
        """Add AddPermission's statement (Sid ``label``) to the queue policy."""
        resource = self.arn(account, name, region)

        def change(record: QueueRecord) -> QueueRecord:
            text = policy.with_permission(
                record.attributes.get("Policy"), label=label, accounts=accounts, actions=actions, resource=resource
            )
            return record.evolve(attributes={**record.attributes, "Policy": text}, modified_at=int(self._clock.now()))

        return await self._update(account, name, change, region=region)

    async def remove_permission(self, account: str, name: str, label: str, region: str | None = None,
                                ) -> QueueRecord:
        """Remove the statement AddPermission made under ``label``; the policy goes when it was the last."""

        def change(record: QueueRecord) -> QueueRecord:
            text = policy.without_permission(record.attributes.get("Policy"), label)
            attributes = {k: v for k, v in record.attributes.items() if k != "Policy"}
            if text is not None:
                attributes["Policy"] = text
            return record.evolve(attributes=attributes, modified_at=int(self._clock.now()))

        return await self._update(account, name, change, region=region)

    async def delete(self, account: str, name: str, region: str | None = None) -> QueueRecord:
        """Tombstone the queue; returns the deleted record so its messages can be dropped.

        The tombstone and a pending drop of the queue id are one transaction, so the partition's worker drops
        the messages even when it cannot be told now; :meth:`clear_pending_drop` once it has been told.
        """
        deleted = await self._update(
            account, name, lambda r: r.evolve(deleted_at=self._clock.now()), write=self._store.tombstone,
            region=region,
        )
        await self._placement.release(deleted.shards)
        await self._release(account, queues=1, shards=len(deleted.shards))
        return deleted

    async def clear_pending_drop(self, deleted: QueueRecord, index: int) -> None:
        """Forget the pending drop :meth:`delete` recorded for shard ``index``, after its worker dropped it."""
        await self._io(self._store.clear_pending_drop, deleted.shards[index].partition, deleted.storage_id(index))

    async def mark_purged(self, account: str, name: str, region: str | None = None) -> QueueRecord:
        def change(record: QueueRecord) -> QueueRecord:
            now = self._clock.now()
            if record.purged_at is not None and now - record.purged_at < PURGE_COOLDOWN_SECONDS:
                raise PurgeQueueInProgress(
                    f"Only one PurgeQueue operation on {name} is allowed every 60 seconds."
                )
            return record.evolve(purged_at=now)

        return await self._update(account, name, change, region=region)

    async def _update(
        self,
        account: str,
        name: str,
        change: Callable[[QueueRecord], QueueRecord],
        *,
        write: Callable[[QueueRecord, QueueRecord], None] | None = None,
        region: str | None = None,
    ) -> QueueRecord:
        """Apply ``change`` to the live record with ``write`` (a conditional replace unless given), retrying
        a lost race on a fresh read."""
        write = write or self._store.replace
        ns = self._ns(region)
        self.invalidate(account, name, ns)
        for _ in range(_WRITE_RETRIES):
            current = await self._io(self._store.get, account, name, ns)
            if current is None or not current.live:
                raise QueueDoesNotExist()
            new = change(current)
            try:
                await self._io(write, current, new)
            except StaleQueueRecord:
                continue
            stored = new.evolve(version=current.version + 1)
            if stored.live:
                self._remember(stored)
            return stored
        raise QueueDoesNotExist()


def _shard_count(attributes: Mapping[str, str]) -> int:
    return int(attributes.get(SHARD_COUNT, "1"))
