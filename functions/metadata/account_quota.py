"""Per-account limits on queues and shards (``FERRYMQ_ACCOUNT_MAX_QUEUES``, ``FERRYMQ_ACCOUNT_MAX_SHARDS``).

A cluster's room is shared by every tenant; without a limit of its own, one account could take all of it (four
queues of 64 shards filled a cluster of 200). An account's queues and shards are counted in DynamoDB
(:class:`~ferrymq.aws.account_usage.AccountUsageStore`) and taken by one conditional write before a queue, or
the shards a queue grows by, are placed; a write that would pass a limit is refused, so racing CreateQueue or
SetQueueAttributes calls cannot pass it between them. Refusals are OverLimit (403), the error SQS gives when a
request would pass one of its limits. Units are given back when a queue is deleted, or when the queue they were
taken for is not written after all.

An account whose counts were never kept (its queues predate the limits) is counted once, from the catalog, the
first time units are taken for it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ferrymq.aws.account_usage import AccountUsage, AccountUsageStore, OverAccountLimit, UsageNotCounted
from ferrymq.bulkhead import Bulkhead, off_loop
from ferrymq.errors import OverLimit, SqsError

log = logging.getLogger(__name__)
T = TypeVar("T")

_SEED_ATTEMPTS = 3


class AccountQuota:
    def __init__(self, store: AccountUsageStore, count: Callable[[str], Awaitable[tuple[int, int]]], *,
                 max_queues: int, max_shards: int, bulkhead: Bulkhead | None = None) -> None:
        """``count(account)``: the queues and shards the account holds, from the catalog (for a first count).
        ``bulkhead``: where the DynamoDB calls run (by default the event loop's default threads)."""
        self._store = store
        self._count = count
        self.max_queues = max_queues
        self.max_shards = max_shards
        self._bulkhead = bulkhead

    async def _io(self, fn: Callable[..., T], *args: object, **kwargs: object) -> T:
        return await off_loop(self._bulkhead, lambda: fn(*args, **kwargs))

    async def take(self, account: str, *, queues: int, shards: int) -> None:
        """Count a new queue of ``shards`` shards (``queues=1``), or ``shards`` more of an existing one
        (``queues=0``), against the account's limits; OverLimit when either would be passed."""
        for _ in range(_SEED_ATTEMPTS):
            try:
                await self._io(self._store.take, account, queues, shards, max_queues=self.max_queues,
                               max_shards=self.max_shards)
                return
            except UsageNotCounted:
                held_queues, held_shards = await self._count(account)
                await self._io(self._store.seed, account, held_queues, held_shards)
            except OverAccountLimit as over:
                raise self._refusal(over.usage, queues, shards) from None
        raise OverLimit(f"The queue limits of account {account} could not be read; send the request again.")

    def _refusal(self, usage: AccountUsage, queues: int, shards: int) -> OverLimit:
        if queues and usage.queues + queues > self.max_queues:
            return OverLimit(
                f"Account {usage.account} has {usage.queues} queues, the most it may have ({self.max_queues}).")
        return OverLimit(
            f"Account {usage.account} has {usage.shards} of its {self.max_shards} shards in use; {shards} more "
            f"would pass the limit (a queue counts one per FerryMQShardCount).")

    async def release(self, account: str, *, queues: int, shards: int) -> None:
        """Give back units of a deleted queue, or of one never written. A release that fails leaves the counts
        high, on the safe side: the queue's own operation stands."""
        if not queues and not shards:
            return
        try:
            await self._io(self._store.release, account, queues, shards)
        except SqsError as exc:
            log.warning("account %s: giving back %d queue(s), %d shard(s) failed: %s", account, queues, shards,
                        exc.code)

    async def usage(self, account: str) -> AccountUsage:
        """The account's counts now (counted from the catalog when they were never kept)."""
        usage = await self._io(self._store.get, account)
        if usage is not None:
            return usage
        held_queues, held_shards = await self._count(account)
        return AccountUsage(account, held_queues, held_shards)
