"""The rest of the cluster as a worker sees it when it hands messages over to another queue.

Dead-letter redrive may have to put a message in a queue of another partition, and a move task sends
messages to a destination queue, or back to the queues their ``DeadLetterQueueSourceArn`` names.
:class:`Peers` is what one partition replica needs for that: its partition, a client for the worker leading
another partition, and a queue found by its ARN.  A worker shares one :class:`SharedPeers` among its replicas
and gives each a :class:`ReplicaPeers` view of it.  :class:`ClusterPeers` answers from the partition map and
the queue catalog in DynamoDB, caching both for a short while; :class:`IsolatedPeers` stands for no cluster at
all; tests pass their own, built like :class:`ClusterPeers` on :class:`LeaderClients`, which keeps the clients
(one per worker, in the shared :class:`ferrymq.rpc.leaders.LeaderClients` the front end uses too).

A hand-over to a partition the same worker serves goes through the worker's own address (``ReplicaPeers``'
``local``): the request is routed to that partition's replica like any other, so it is stored idempotently
and durably exactly as a hand-over to another worker is, without a lookup in the partition map.

Only outages become ServiceUnavailable here (a move task waits on those and tries again); any other failure
of a lookup, a bug included, propagates as it is, so the task ends instead of retrying it for ever.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from ferrymq.arn import parse_queue_arn
from ferrymq.clock import Clock, SystemClock
from ferrymq.destinations import QueueTarget, target_of
from ferrymq.errors import ServiceUnavailable
from ferrymq.rpc import leaders
from ferrymq.rpc.client import DEFAULT_REQUEST_TIMEOUT, WorkerClient
from ferrymq.rpc.peer_auth import PeerAuth
from ferrymq.ttl_cache import TtlCache

if TYPE_CHECKING:
    from ferrymq.aws.partitions import PartitionMap
    from ferrymq.aws.queue_store import QueueStore
    from ferrymq.settings import Settings

class SharedPeers(Protocol):
    """The rest of the cluster, shared by the replicas of one worker."""

    async def worker(self, partition: int) -> WorkerClient:
        """A client for the worker leading ``partition``; raises ServiceUnavailable when there is none."""
        ...

    async def forget(self, partition: int) -> None:
        """Drop the client for ``partition`` after it failed, so the next call looks the leader up again."""
        ...

    async def queue(self, arn: str) -> QueueTarget | None:
        """The live queue named by ``arn``, None when there is none; raises ServiceUnavailable."""
        ...

    async def close(self) -> None: ...


class Peers(Protocol):
    partition: int
    """The partition of the replica these peers are seen from."""

    async def worker(self, partition: int) -> WorkerClient:
        """A client for the worker leading ``partition``; raises ServiceUnavailable when there is none."""
        ...

    async def forget(self, partition: int) -> None:
        """Drop the client for ``partition`` after it failed, so the next call looks the leader up again."""
        ...

    async def queue(self, arn: str) -> QueueTarget | None:
        """The live queue named by ``arn``, None when there is none; raises ServiceUnavailable."""
        ...

    async def close(self) -> None: ...


class ReplicaPeers:
    """:class:`Peers` as the replica of ``partition`` sees them: ``local(p)`` is a client for this worker itself
    when it serves partition ``p`` (None otherwise), else the shared peers answer.  Closing the view closes
    nothing: the worker closes what it shares."""

    def __init__(
        self, shared: SharedPeers, partition: int, local: Callable[[int], WorkerClient | None] | None = None
    ) -> None:
        self.partition = partition
        self._shared = shared
        self._local = local

    async def worker(self, partition: int) -> WorkerClient:
        if self._local is not None:
            client = self._local(partition)
            if client is not None:
                return client
        return await self._shared.worker(partition)

    async def forget(self, partition: int) -> None:
        await self._shared.forget(partition)

    async def queue(self, arn: str) -> QueueTarget | None:
        return await self._shared.queue(arn)

    async def close(self) -> None:
        return None


class IsolatedPeers:
    """The peers of a worker that knows no cluster: no other worker, no queue catalog."""

    async def worker(self, partition: int) -> WorkerClient:
        raise ServiceUnavailable(f"This worker knows no leader for partition {partition}.")

    async def forget(self, partition: int) -> None:
        return None

    async def queue(self, arn: str) -> QueueTarget | None:
        raise ServiceUnavailable("This worker has no queue catalog.")

    async def close(self) -> None:
        return None


class LeaderClients(ABC):
    """The client half of :class:`SharedPeers`: one client per leading worker, made when first needed, looked up
    again ``leader_cache_seconds`` later or after it failed, and replaced when the leader moved.  Subclasses
    say where a partition's leader listens."""

    def __init__(
        self,
        *,
        connect_timeout: float,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        clock: Clock | None = None,
        leader_cache_seconds: float = 30.0,
        auth: PeerAuth | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self._leaders = leaders.LeaderClients(
            self._endpoint,
            clock=self._clock,
            ttl=leader_cache_seconds,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            auth=auth,
        )

    @abstractmethod
    async def leader_address(self, partition: int) -> tuple[str, int] | None:
        """``(host, port)`` of the worker leading ``partition``, None when no worker does."""

    async def _endpoint(self, partition: int) -> leaders.Endpoint | None:
        address = await self.leader_address(partition)
        return None if address is None else leaders.Endpoint(*address)

    def clients(self) -> dict[int, WorkerClient]:
        """The client held for each partition (a copy)."""
        return self._leaders.clients()

    async def worker(self, partition: int) -> WorkerClient:
        return await self._leaders.client(partition)

    async def forget(self, partition: int) -> None:
        self._leaders.forget(partition)

    async def close(self) -> None:
        await self._leaders.close()


class ClusterPeers(LeaderClients):
    """Peers from the partition map and the queue catalog, whose clients are made when first needed (a worker
    that never hands a message over never loads boto3's service models, which would only weigh on its GC)."""

    def __init__(
        self,
        *,
        partition_map: Callable[[], PartitionMap],
        queue_store: Callable[[], QueueStore],
        clock: Clock | None = None,
        cache_seconds: float = 2.0,
        max_queues: int = 4096,
        connect_timeout: float = 5.0,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        leader_cache_seconds: float = 30.0,
        auth: PeerAuth | None = None,
    ) -> None:
        super().__init__(
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            clock=clock,
            leader_cache_seconds=leader_cache_seconds,
            auth=auth,
        )
        self._make_map = partition_map
        self._make_store = queue_store
        self._map: PartitionMap | None = None
        self._store: QueueStore | None = None
        # A 1-tuple, so that "no such queue" is cached as well as a queue.
        self._queues: TtlCache[str, tuple[QueueTarget | None]] = TtlCache(self._clock, cache_seconds, max_queues)

    @classmethod
    def from_settings(cls, settings: Settings) -> ClusterPeers:
        from ferrymq.aws import session
        from ferrymq.aws.partitions import PartitionMap
        from ferrymq.aws.queue_store import QueueStore

        return cls(
            partition_map=lambda: PartitionMap.from_settings(settings),
            queue_store=lambda: QueueStore(session.client("dynamodb", settings), settings.queues_table),
            connect_timeout=settings.worker_connect_timeout_seconds,
            request_timeout=settings.worker_request_timeout_seconds,
            leader_cache_seconds=settings.metadata_cache_seconds,
            auth=PeerAuth.from_settings(settings),
        )

    def _lookup(self, partition: int) -> Any:
        if self._map is None:
            self._map = self._make_map()
        return self._map.lookup(partition)

    def _get_queue(self, account: str, name: str) -> Any:
        if self._store is None:
            self._store = self._make_store()
        return self._store.get(account, name)

    async def leader_address(self, partition: int) -> tuple[str, int] | None:
        address = await _outages_unavailable("The partition map", self._lookup, partition)
        return None if address is None else (address.host, address.port)

    async def queue(self, arn: str) -> QueueTarget | None:
        hit = self._queues.get(arn)
        if hit is not None:
            return hit[0]
        parsed = parse_queue_arn(arn)
        if parsed is None:
            return None
        _, account, name = parsed
        record = await _outages_unavailable("The queue catalog", self._get_queue, account, name)
        target = target_of(record, arn) if record is not None and record.deleted_at is None else None
        self._queues.put(arn, (target,))
        return target


_TRANSPORT_ERRORS = (EndpointConnectionError, ConnectTimeoutError, ConnectionClosedError, ReadTimeoutError)
_OUTAGE_CODES = frozenset(
    {
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
    }
)

R = TypeVar("R")


async def _outages_unavailable(what: str, call: Callable[..., R], *args: Any) -> R:
    """``call(*args)`` in a thread, with DynamoDB unreachable or throttling as ServiceUnavailable (the
    adapters report most outages so already) and everything else left as it is."""
    try:
        return await asyncio.to_thread(call, *args)
    except _TRANSPORT_ERRORS as exc:
        raise ServiceUnavailable(f"{what} could not be read: {exc}") from exc
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in _OUTAGE_CODES:
            raise ServiceUnavailable(f"{what} could not be read: {exc}") from exc
        raise

