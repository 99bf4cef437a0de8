"""Building the front end from Settings: the one place its parts are put together."""

from __future__ import annotations

from ferrymq.aws.credentials import CredentialStore
from ferrymq.aws.dedup_store import DedupStore
from ferrymq.aws.partitions import PartitionMap
from ferrymq.aws.queue_store import QueueStore
from ferrymq.aws.session import client
from ferrymq.clock import Clock, SystemClock
from ferrymq.rpc.leaders import LeaderClients
from ferrymq.settings import Settings
from functions.frontend.auth import Authenticator
from functions.frontend.context import Services
from functions.frontend.dispatch import Dispatcher
from functions.frontend.pipeline import Frontend
from functions.metadata.catalog import QueueCatalog


def build_frontend(settings: Settings, clock: Clock | None = None) -> Frontend:
    clock = clock or SystemClock()
    dynamodb = client("dynamodb", settings)
    catalog = QueueCatalog(
        QueueStore(dynamodb, settings.queues_table),
        clock,
        partitions=settings.partitions,
        ttl=settings.metadata_cache_seconds,
        region=settings.region,
    )
    leaders = LeaderClients(
        PartitionMap(dynamodb, settings.partitions_table).lookup,
        clock=clock,
        ttl=settings.metadata_cache_seconds,
        connect_timeout=settings.worker_connect_timeout_seconds,
        request_timeout=settings.worker_request_timeout_seconds,
    )
    services = Services(
        settings=settings,
        clock=clock,
        catalog=catalog,
        dispatcher=Dispatcher(leaders, on_queue_gone=lambda q: catalog.invalidate(q.account, q.name)),
        dedup=DedupStore(dynamodb, settings.dedup_table),
    )
    authenticator = Authenticator(
        CredentialStore(dynamodb, settings.credentials_table),
        clock,
        ttl=settings.credentials_cache_seconds,
        max_skew_seconds=settings.max_clock_skew_seconds,
    )
    return Frontend(services, authenticator)
