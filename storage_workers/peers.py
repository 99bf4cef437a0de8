"""The rest of the cluster as a worker sees it when it hands messages over to another queue.

Dead-letter redrive may have to put a message in a queue whose partition another worker leads, and a move
task sends messages to a destination queue, or back to the queues their ``DeadLetterQueueSourceArn`` names.
:class:`Peers` is what the worker needs for that: a client for the worker leading a partition, and a queue
found by its ARN.  :class:`ClusterPeers` answers from the partition map and the queue catalog in DynamoDB,
caching both for a short while; :class:`IsolatedPeers` stands for no cluster at all; tests pass their own,
built like :class:`ClusterPeers` on :class:`LeaderClients`, which keeps the clients.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ferrymq.clock import Clock, SystemClock
from ferrymq.errors import ServiceUnavailable, SqsError
from ferrymq.rpc.client import WorkerClient

if TYPE_CHECKING:
    from ferrymq.aws.partitions import PartitionMap
    from ferrymq.aws.queue_store import QueueStore
    from ferrymq.settings import Settings

DEFAULT_RETENTION_SECONDS = 345600


@dataclass(frozen=True, slots=True)
class QueueTarget:
    """Where a queue's messages live, and what storing one there needs."""

    queue_id: str
    partition: int
    fifo: bool
    retention_seconds: int
    arn: str


class Peers(Protocol):
    partition: int
    """The partition this worker leads."""

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


def parse_queue_arn(arn: str) -> tuple[str, str, str] | None:
    """``(region, account, name)`` of ``arn:aws:sqs:<region>:<account>:<name>``, or None."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "sqs" or not parts[4] or not parts[5]:
        return None
    return parts[3], parts[4], parts[5]


class IsolatedPeers:
    """The peers of a worker that knows no cluster: only its own partition, no queue catalog."""

    def __init__(self, partition: int) -> None:
        self.partition = partition

    async def worker(self, partition: int) -> WorkerClient:
        raise ServiceUnavailable(f"This worker knows no leader for partition {partition}.")

    async def forget(self, partition: int) -> None:
        return None

    async def queue(self, arn: str) -> QueueTarget | None:
        raise ServiceUnavailable("This worker has no queue catalog.")

    async def close(self) -> None:
        return None


class LeaderClients(ABC):
    """The client half of :class:`Peers`: one client per partition's leader, made when first needed and kept
    until it fails.  Subclasses say where a partition's leader listens."""

    def __init__(self, partition: int, *, connect_timeout: float) -> None:
        self.partition = partition
        self._connect_timeout = connect_timeout
        self._clients: dict[int, WorkerClient] = {}

    @abstractmethod
    async def leader_address(self, partition: int) -> tuple[str, int] | None:
        """``(host, port)`` of the worker leading ``partition``, None when no worker does."""

    async def worker(self, partition: int) -> WorkerClient:
        client = self._clients.get(partition)
        if client is not None:
            return client
        address = await self.leader_address(partition)
        if address is None:
            raise ServiceUnavailable(f"No storage worker serves partition {partition}.")
        # Another request may have made one while the address was looked up.
        client = self._clients.get(partition)
        if client is None:
            client = self._clients[partition] = WorkerClient(*address, connect_timeout=self._connect_timeout)
        return client

    async def forget(self, partition: int) -> None:
        client = self._clients.pop(partition, None)
        if client is not None:
            await client.close()

    async def close(self) -> None:
        clients, self._clients = self._clients, {}
        for client in clients.values():
            with contextlib.suppress(Exception):
                await client.close()


class ClusterPeers(LeaderClients):
    """Peers from the partition map and the queue catalog, whose clients are made when first needed (a worker
    that never hands a message over never loads boto3's service models, which would only weigh on its GC)."""

    def __init__(
        self,
        partition: int,
        *,
        partition_map: Callable[[], PartitionMap],
        queue_store: Callable[[], QueueStore],
        clock: Clock | None = None,
        cache_seconds: float = 2.0,
        connect_timeout: float = 5.0,
    ) -> None:
        super().__init__(partition, connect_timeout=connect_timeout)
        self._make_map = partition_map
        self._make_store = queue_store
        self._map: PartitionMap | None = None
        self._store: QueueStore | None = None
        self._clock = clock or SystemClock()
        self._ttl = cache_seconds
        self._queues: dict[str, tuple[float, QueueTarget | None]] = {}

    @classmethod
    def from_settings(cls, settings: Settings, partition: int) -> ClusterPeers:
        from ferrymq.aws import session
        from ferrymq.aws.partitions import PartitionMap
        from ferrymq.aws.queue_store import QueueStore

        return cls(
            partition,
            partition_map=lambda: PartitionMap.from_settings(settings),
            queue_store=lambda: QueueStore(session.client("dynamodb", settings), settings.queues_table),
            connect_timeout=settings.worker_connect_timeout_seconds,
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
        address = await asyncio.to_thread(self._lookup, partition)
        return None if address is None else (address.host, address.port)

    async def queue(self, arn: str) -> QueueTarget | None:
        hit = self._queues.get(arn)
        now = self._clock.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        parsed = parse_queue_arn(arn)
        if parsed is None:
            return None
        _, account, name = parsed
        try:
            record = await asyncio.to_thread(self._get_queue, account, name)
        except SqsError:
            raise
        except Exception as exc:  # botocore ClientErrors other than outages: still nothing to decide on
            raise ServiceUnavailable(f"The queue catalog could not be read: {exc}") from None
        target = _target(record, arn) if record is not None and record.deleted_at is None else None
        self._queues[arn] = (now + self._ttl, target)
        return target


def _target(record: Any, arn: str) -> QueueTarget:
    try:
        retention = int(record.attributes.get("MessageRetentionPeriod", DEFAULT_RETENTION_SECONDS))
    except ValueError:
        retention = DEFAULT_RETENTION_SECONDS
    return QueueTarget(record.queue_id, record.partition, record.name.endswith(".fifo"), retention, arn)
