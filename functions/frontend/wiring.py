"""Building the front end from Settings: the one place its parts are put together."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from ferrymq.aws.account_usage import AccountUsageStore
from ferrymq.aws.clusters import ClusterRegistry
from ferrymq.aws.credentials import CredentialStore
from ferrymq.aws.dashboard_sessions import SessionTable
from ferrymq.aws.dedup_store import DedupStore
from ferrymq.aws.kms import Kms
from ferrymq.aws.partitions import PartitionMap, WorkerAddress
from ferrymq.aws.queue_store import QueueStore
from ferrymq.aws.session import client
from ferrymq.bulkhead import Bulkhead
from ferrymq.clock import Clock, SystemClock
from ferrymq.cluster_status import Registries
from ferrymq.frontend.actions import ACTIONS
from ferrymq.frontend.admin_services import AdminServices
from ferrymq.frontend.auth import Authenticator
from ferrymq.frontend.context import Services
from ferrymq.frontend.dashboard.errors import RecentErrors
from ferrymq.frontend.dashboard.sessions import Sessions, cookie_key_of
from ferrymq.frontend.dispatch import Dispatcher, WorkerLimits
from ferrymq.frontend.encryption import MessageCipher
from ferrymq.frontend.metrics.service import GatewayMetrics, build_gateway_metrics
from ferrymq.frontend.pipeline import Frontend
from ferrymq.frontend.siblings import Counts, Siblings, counts_of
from ferrymq.frontend.usage import UsageRecorder, default_instance
from ferrymq.metadata import event_source_mappings
from ferrymq.metadata.account_quota import AccountQuota
from ferrymq.metadata.catalog import QueueCatalog
from ferrymq.metadata.event_source_mappings import MappingStore
from ferrymq.metadata.queue_placement import QueuePlacement
from ferrymq.rpc.leaders import LeaderClients
from ferrymq.rpc.peer_auth import PeerAuth
from ferrymq.settings import Settings
from ferrymq.sse.data_keys import DataKeys
from ferrymq.usage.writer import FirehoseSink, S3Sink, UsageSink, UsageWriter

SIBLINGS_PERIOD_SECONDS = 2.0
"""How often a gateway process writes its counts for its siblings: the dashboard polls every 2 s."""


def build_frontend(settings: Settings, clock: Clock | None = None, *, usage_thread: bool = True) -> Frontend:
    clock = clock or SystemClock()
    dynamodb = client("dynamodb", settings)
    # The front end's DynamoDB calls get threads of their own: a slow DynamoDB holds up only what needs it.
    metadata = Bulkhead(
        "metadata store", max_concurrent=settings.metadata_max_concurrent,
        max_wait_seconds=settings.dependency_wait_seconds, call_timeout_seconds=settings.metadata_timeout_seconds,
    )
    quota = AccountQuota(
        AccountUsageStore(dynamodb, settings.queues_table),
        lambda account: catalog.held(account, sorted(settings.served_regions)),
        max_queues=settings.account_max_queues, max_shards=settings.account_max_shards, bulkhead=metadata,
    )
    catalog = QueueCatalog(
        QueueStore(dynamodb, settings.queues_table),
        clock,
        partitions=settings.partitions,
        ttl=settings.metadata_cache_seconds,
        region=settings.region,
        placement=QueuePlacement(
            ClusterRegistry(dynamodb, settings.workers_table), clock, partitions=settings.partitions,
            bulkhead=metadata,
        ),
        bulkhead=metadata,
        quota=quota,
    )
    partition_map = PartitionMap(dynamodb, settings.partitions_table)

    async def leader_of(partition: int) -> WorkerAddress | None:
        return await metadata.run(partition_map.lookup, partition)

    leaders = LeaderClients(
        leader_of,
        clock=clock,
        ttl=settings.metadata_cache_seconds,
        connect_timeout=settings.worker_connect_timeout_seconds,
        request_timeout=settings.worker_request_timeout_seconds,
        auth=PeerAuth.from_settings(settings),
    )
    dispatcher = Dispatcher(
        leaders,
        on_queue_gone=lambda q: catalog.invalidate(q.account, q.name, q.region),
        # An election takes up to a lease and a poll: requests wait that long for the next leader.
        failover_seconds=settings.leader_lease_seconds + 1.0,
        clock=clock,
        limits=WorkerLimits(
            max_in_flight=settings.worker_max_in_flight,
            max_wait_seconds=settings.dependency_wait_seconds,
            breaker_failures=settings.worker_breaker_failures,
            breaker_cooldown_seconds=settings.worker_breaker_cooldown_seconds,
        ),
    )
    recent_errors = RecentErrors()
    # The siblings read the metrics built next only once they run (Frontend.start).
    siblings = build_siblings(settings, lambda: metrics, recent_errors)
    metrics = build_gateway_metrics(settings, catalog, dispatcher, ACTIONS, siblings)
    services = Services(
        settings=settings,
        clock=clock,
        catalog=catalog,
        dispatcher=dispatcher,
        dedup=DedupStore(dynamodb, settings.dedup_table),
        cipher=build_cipher(settings, clock),
        metadata=metadata,
        metrics=metrics.recorder if metrics is not None else None,
        admin=AdminServices(CredentialStore(dynamodb, settings.credentials_table),
                            Registries.from_client(dynamodb, settings), PeerAuth.from_settings(settings),
                            lambda: client("s3", settings)),
        mappings=MappingStore(dynamodb, event_source_mappings.table_name(settings)),
    )
    authenticator = Authenticator(
        CredentialStore(dynamodb, settings.credentials_table),
        clock,
        ttl=settings.credentials_cache_seconds,
        max_skew_seconds=settings.max_clock_skew_seconds,
        regions=settings.served_regions,
        recheck_seconds=settings.credentials_recheck_seconds,
        negative_ttl=settings.credentials_negative_cache_seconds,
        bulkhead=metadata,
    )
    usage = build_usage_recorder(settings, catalog, clock, background=usage_thread) if settings.usage_enabled else None
    return Frontend(services, authenticator, usage=usage, metrics=metrics, recent_errors=recent_errors,
                    siblings=siblings)


def build_siblings(settings: Settings, metrics: Callable[[], GatewayMetrics | None],
                   recent_errors: RecentErrors) -> Siblings | None:
    """What this gateway shares with the other processes on its port; None when it serves the port alone."""
    if settings.gateway_processes <= 1:
        return None

    def counts() -> Counts:
        built = metrics()
        return counts_of(built.recorder if built else None, recent_errors, built.depths if built else None)

    def changed() -> Hashable:
        built = metrics()
        if built is None:
            return recent_errors.added
        return (built.recorder.answered, recent_errors.added, built.depths.refreshed_at if built.depths else None)

    return Siblings(settings.gateway_siblings_dir, counts, changed, period=SIBLINGS_PERIOD_SECONDS)


def build_dashboard_sessions(services: Services) -> Sessions:
    """The dashboard's logins, in DynamoDB, on the front end's metadata threads."""
    settings = services.settings
    table = SessionTable(client("dynamodb", settings), settings.dashboard_sessions_table)
    return Sessions(table, services.clock, services.metadata, cookie_key=cookie_key_of(settings.cluster_secret))


def build_cipher(settings: Settings, clock: Clock) -> MessageCipher:
    """Server-side encryption: data keys through KMS (the stand-in's, LocalStack's or AWS's), on threads of
    their own: a slow KMS holds up only the requests that need a data key it has not given yet."""
    keys = DataKeys(Kms(client("kms", settings)), clock.monotonic, max_age=settings.sse_key_cache_seconds)
    kms = Bulkhead("key service", max_concurrent=settings.metadata_max_concurrent,
                   max_wait_seconds=settings.dependency_wait_seconds,
                   call_timeout_seconds=settings.metadata_timeout_seconds)
    return MessageCipher(keys, settings.managed_sse_key, kms)


def build_usage_recorder(settings: Settings, catalog: QueueCatalog, clock: Clock, *,
                         background: bool = True) -> UsageRecorder:
    """Records to Firehose when a stream is named (the Lambda), else straight to the usage bucket.

    ``background``: run the flusher thread; the Lambda entry flushes at the end of invocations instead,
    as a frozen execution environment runs no thread between them.
    """
    sink: UsageSink
    if settings.usage_firehose_stream:
        sink = FirehoseSink(client("firehose", settings), settings.usage_firehose_stream)
    else:
        sink = S3Sink(client("s3", settings), settings.usage_bucket)
    instance = settings.usage_instance or default_instance()
    recorder: UsageRecorder | None = None

    def build(raw: tuple[Any, ...]) -> dict[str, Any]:
        assert recorder is not None
        return recorder.build(raw)

    writer = UsageWriter(sink, settings.usage_spool, instance, flush_seconds=settings.usage_flush_seconds,
                         flush_records=settings.usage_flush_records, attempts=settings.usage_upload_attempts,
                         clock=clock, finish=build)
    recorder = UsageRecorder(writer, region=settings.region, queue_lookup=catalog.cached)
    if background:
        writer.start()
    return recorder
