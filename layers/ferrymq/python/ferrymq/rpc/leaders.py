"""``LeaderClients``: which storage worker leads a partition, and one client for it, per partition.

The front end's dispatcher and the workers' peers (dead-letter hand-overs, move tasks) both need "a client
for whoever leads partition *p* now".  The leader's address comes from a lookup (the partition map in
DynamoDB, or a table a test fills in), trusted for ``ttl`` seconds and looked up again sooner after
:meth:`LeaderClients.forget`.  A lookup that names the same address keeps the client (and its connection);
one that names another address replaces it and closes the old one.  So there is never more than one client
per partition, however often workers restart on new ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ferrymq.clock import Clock
from ferrymq.errors import ServiceUnavailable
from ferrymq.rpc.client import DEFAULT_REQUEST_TIMEOUT, WorkerClient


class Address(Protocol):
    """Where a worker listens; :class:`ferrymq.aws.partitions.WorkerAddress` is one."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...


class Endpoint(NamedTuple):
    """An :class:`Address` for lookups that know nothing but host and port."""

    host: str
    port: int


LeaderLookup = Callable[[int], Awaitable[Address | None]] | Callable[[int], Address | None]
"""The address of the worker leading a partition, None when none does.  A coroutine function is awaited; any
other callable is taken to block (a DynamoDB read) and runs in a thread."""


@dataclass(slots=True)
class _Leader:
    client: WorkerClient
    expires: float
    """On the clock's monotonic time."""


class LeaderClients:
    """One :class:`WorkerClient` per partition, for its current leader (see the module docstring)."""

    def __init__(
        self,
        lookup: LeaderLookup,
        *,
        clock: Clock,
        ttl: float,
        connect_timeout: float = 5.0,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        self._lookup = lookup
        self._lookup_is_async = inspect.iscoroutinefunction(lookup)
        self._clock = clock
        self._ttl = ttl
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._leaders: dict[int, _Leader] = {}
        # One lookup in flight per partition: when an entry expires under load, the requests that find it
        # expired share one read of the partition map instead of each making their own.
        self._lookups: dict[int, asyncio.Future[WorkerClient]] = {}
        self._closed = False

    def clients(self) -> dict[int, WorkerClient]:
        """The client held for each partition (a copy)."""
        return {partition: leader.client for partition, leader in self._leaders.items()}

    async def client(self, partition: int) -> WorkerClient:
        """A client for the worker leading ``partition``; raises ServiceUnavailable when none does."""
        leader = self._leaders.get(partition)
        if leader is not None and leader.expires > self._clock.monotonic():
            return leader.client
        if self._closed:
            raise ServiceUnavailable("The storage worker clients are closed.")
        lookup = self._lookups.get(partition)
        if lookup is None:
            lookup = self._lookups[partition] = asyncio.ensure_future(self._refresh(partition))
            lookup.add_done_callback(lambda done: self._lookup_done(partition, done))
        # Shielded: one caller giving up must not cancel the lookup the others wait on.
        return await asyncio.shield(lookup)

    def forget(self, partition: int) -> None:
        """Look the leader of ``partition`` up again on the next call, after its worker failed to answer; the
        client stays if the leader is still where it was."""
        leader = self._leaders.get(partition)
        if leader is not None:
            leader.expires = -math.inf

    async def close(self) -> None:
        """Close every client; no client is handed out afterwards."""
        # Lookups under way are left to finish: they see the flag and answer ServiceUnavailable, where
        # cancelling them would hand their callers a cancellation that is not theirs.
        self._closed = True
        leaders, self._leaders = self._leaders, {}
        for leader in leaders.values():
            await _close(leader.client)

    async def _refresh(self, partition: int) -> WorkerClient:
        if self._lookup_is_async:
            address = await self._lookup(partition)  # type: ignore[misc]
        else:
            address = await asyncio.to_thread(self._lookup, partition)
        if self._closed:
            raise ServiceUnavailable("The storage worker clients are closed.")
        old = self._leaders.get(partition)
        if address is None:
            if old is not None:
                del self._leaders[partition]
                await _close(old.client)
            raise ServiceUnavailable(f"No storage worker serves partition {partition}.")
        expires = self._clock.monotonic() + self._ttl
        if old is not None and not old.client.closed and (old.client.host, old.client.port) == (
            address.host,
            address.port,
        ):
            old.expires = expires
            return old.client
        client = WorkerClient(
            address.host,
            address.port,
            connect_timeout=self._connect_timeout,
            request_timeout=self._request_timeout,
        )
        self._leaders[partition] = _Leader(client, expires)
        if old is not None:
            # Requests still running on the old client fail as ServiceUnavailable, which clients retry.
            await _close(old.client)
        return client

    def _lookup_done(self, partition: int, done: asyncio.Future[WorkerClient]) -> None:
        if self._lookups.get(partition) is done:
            del self._lookups[partition]
        if not done.cancelled():
            # Retrieved here so a failure whose callers all gave up is not reported as never retrieved.
            done.exception()


async def _close(client: WorkerClient) -> None:
    with contextlib.suppress(Exception):
        await client.close()
