"""``LeaderClients``: which storage worker leads a partition, and one client per worker.

The front end's dispatcher and the workers' peers (dead-letter hand-overs, move tasks) both need "a client
for whoever leads partition *p* now".  The leader's address comes from a lookup (the partition map in
DynamoDB, or a table a test fills in), trusted for ``ttl`` seconds and looked up again sooner after
:meth:`LeaderClients.forget`.  Clients are kept per worker address: the partitions one worker serves share
its client (and its connection).  A lookup that names the same address keeps the client; one that names
another address points the partition at that address's client, and the old address's client is closed once
no partition points at it any more.  So there is never more than one client per worker address in use,
however often workers restart on new ports.
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
from ferrymq.rpc.peer_auth import PeerAuth


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
    address: tuple[str, int]
    expires: float
    """On the clock's monotonic time."""


class LeaderClients:
    """One :class:`WorkerClient` per worker address, found per partition (see the module docstring)."""

    def __init__(
        self,
        lookup: LeaderLookup,
        *,
        clock: Clock,
        ttl: float,
        connect_timeout: float = 5.0,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        auth: PeerAuth | None = None,
    ) -> None:
        self._lookup = lookup
        self._auth = auth
        self._lookup_is_async = inspect.iscoroutinefunction(lookup)
        self._clock = clock
        self._ttl = ttl
        self._connect_timeout = connect_timeout
        self._request_timeout = request_timeout
        self._leaders: dict[int, _Leader] = {}
        self._clients: dict[tuple[str, int], WorkerClient] = {}
        # One lookup in flight per partition: when an entry expires under load, the requests that find it
        # expired share one read of the partition map instead of each making their own.
        self._lookups: dict[int, asyncio.Future[WorkerClient]] = {}
        self._closed = False

    def clients(self) -> dict[int, WorkerClient]:
        """The client held for each partition (a copy); partitions of one worker share one."""
        return {partition: self._clients[leader.address] for partition, leader in self._leaders.items()}

    def workers(self) -> dict[tuple[str, int], WorkerClient]:
        """The client held for each worker address (a copy)."""
        return dict(self._clients)

    def known(self, partition: int) -> WorkerClient | None:
        """The client :meth:`client` would return at once, without a lookup; None when it would look one up."""
        leader = self._leaders.get(partition)
        if leader is not None and leader.expires > self._clock.monotonic():
            client = self._clients.get(leader.address)
            if client is not None and not client.closed:
                return client
        return None

    async def client(self, partition: int) -> WorkerClient:
        """A client for the worker leading ``partition``; raises ServiceUnavailable when none does."""
        client = self.known(partition)
        if client is not None:
            return client
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
        self._leaders = {}
        clients, self._clients = self._clients, {}
        for client in clients.values():
            await _close(client)

    async def _refresh(self, partition: int) -> WorkerClient:
        if self._lookup_is_async:
            address = await self._lookup(partition)  # type: ignore[misc]
        else:
            address = await asyncio.to_thread(self._lookup, partition)
        if self._closed:
            raise ServiceUnavailable("The storage worker clients are closed.")
        old = self._leaders.pop(partition, None)
        if address is None:
            if old is not None:
                await self._release(old.address)
            raise ServiceUnavailable(f"No storage worker serves partition {partition}.")
        where = (address.host, address.port)
        client = self._clients.get(where)
        if client is None or client.closed:
            client = self._clients[where] = WorkerClient(
                address.host,
                address.port,
                connect_timeout=self._connect_timeout,
                request_timeout=self._request_timeout,
                auth=self._auth,
            )
        self._leaders[partition] = _Leader(where, self._clock.monotonic() + self._ttl)
        if old is not None and old.address != where:
            await self._release(old.address)
        return client

    async def _release(self, address: tuple[str, int]) -> None:
        """Close the client for ``address`` once no partition points at it any more."""
        if any(leader.address == address for leader in self._leaders.values()):
            return
        client = self._clients.pop(address, None)
        if client is not None:
            # Requests still running on it fail as ServiceUnavailable, which clients retry.
            await _close(client)

    def _lookup_done(self, partition: int, done: asyncio.Future[WorkerClient]) -> None:
        if self._lookups.get(partition) is done:
            del self._lookups[partition]
        if not done.cancelled():
            # Retrieved here so a failure whose callers all gave up is not reported as never retrieved.
            done.exception()


async def _close(client: WorkerClient) -> None:
    with contextlib.suppress(Exception):
        await client.close()
