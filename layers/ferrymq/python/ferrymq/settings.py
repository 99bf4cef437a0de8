"""The one settings object, built once per entry point from ``FERRYMQ_*`` variables.

AWS endpoints are not FerryMQ settings: boto3 reads ``AWS_ENDPOINT_URL`` and
``AWS_ENDPOINT_URL_<SERVICE>`` itself, and :func:`ferrymq.aws.session.client` passes nothing that would
override them.  ``aws_endpoint_url`` is kept here only so the local stack can tell whether the user named
an endpoint (then it starts no stand-in).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ferrymq"


def _cluster_secret(env: Mapping[str, str]) -> str:
    secret = env.get("FERRYMQ_CLUSTER_SECRET", "")
    path = env.get("FERRYMQ_CLUSTER_SECRET_FILE")
    if not secret and path:
        try:
            secret = Path(path).read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"FERRYMQ_CLUSTER_SECRET_FILE: {path!r} cannot be read ({exc})") from None
    return secret


def _networks(text: str) -> tuple[str, ...]:
    """The CIDRs of a comma-separated list; a bad one stops the process at its start, not at a delivery."""
    found = tuple(n.strip() for n in text.split(",") if n.strip())
    for network in found:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError:
            raise ValueError(f"FERRYMQ_PUSH_ALLOWED_NETWORKS: {network!r} is not a network in CIDR form") from None
    return found


GATEWAY_SHARE_OF_CORES = 3
"""Cores per gateway process when ``FERRYMQ_GATEWAY_PROCESSES`` is ``auto``: a message costs the gateway about 40 %
of what it costs the whole default stack (docs/design/cost-per-message.md), and the workers, the stand-in and
the push hosts want the rest."""


MAX_GATEWAY_PROCESSES = 64
"""A bound on a typo's (or a hostile environment's) cost: each process is a Python interpreter of its own."""


def _gateway_processes(text: str, cores: int | None) -> int:
    """``auto``: one gateway process per ``GATEWAY_SHARE_OF_CORES`` cores beyond the first, at least one."""
    if text.strip().lower() == "auto":
        return min(MAX_GATEWAY_PROCESSES, max(1, ((cores or 1) - 1) // GATEWAY_SHARE_OF_CORES))
    n = int(text)
    if not 1 <= n <= MAX_GATEWAY_PROCESSES:
        raise ValueError(f"FERRYMQ_GATEWAY_PROCESSES: {text!r} is not a number of processes "
                         f"(1 to {MAX_GATEWAY_PROCESSES}, or auto)")
    return n


@dataclass(frozen=True, slots=True)
class Settings:
    region: str = "us-east-1"
    account_id: str = "000000000000"
    # Local development credentials, following LocalStack's convention.
    dev_access_key: str = "test"
    dev_secret_key: str = "test"

    # Front end (local gateway).
    host: str = "127.0.0.1"
    port: int = 9324
    # When set, queue URLs use this base instead of the request's Host header.
    queue_url_base: str | None = None
    # How queue URLs name their region: "host" (sqs.<region>.<host>), "path" (<base>/queue/<region>/...),
    # "plain" (<base>/<account>/<name>, the home region only) or "auto" (host for DNS names, path for IP
    # addresses and localhost).  See functions/frontend/queue_urls.py.
    queue_url_form: str = "auto"
    metadata_cache_seconds: float = 30.0
    credentials_cache_seconds: float = 300.0
    # Key deletion, disabling and enabling (`ferrymq credentials`) reach every front end within this bound: each
    # re-reads the keys' version item at most this often and drops what it cached once the version has moved.
    credentials_recheck_seconds: float = 2.0
    # How long an access key id found unknown is answered from memory; a key created since works after it.
    credentials_negative_cache_seconds: float = 2.0
    # Regions served besides `region` (FERRYMQ_REGIONS, comma-separated). Unset: every region botocore knows, as
    # AWS, LocalStack and moto serve them; set, it narrows the regions to these and `region`. A signature scoped
    # to a region not served is refused, as AWS refuses a made-up one.
    extra_regions: tuple[str, ...] = ()
    max_clock_skew_seconds: int = 900
    # SQS's in-flight quotas; operators of a small deployment may lower them.
    max_in_flight_standard: int = 120_000
    max_in_flight_fifo: int = 20_000
    # Transport limits of the local gateway (functions/frontend/transport_limits.py, infra/http_protocol.py).
    # Largest request body: a 1 MiB batch, percent-encoded by the query protocol, still fits.
    max_request_bytes: int = 8 * 1024 * 1024
    # Bytes of request bodies buffered, gateway-wide, before their signature has been verified; over it, 503.
    unauthenticated_buffer_bytes: int = 64 * 1024 * 1024
    # From a connection's first byte (or a request's, on a kept-alive one) to the end of its headers.
    header_timeout_seconds: float = 10.0
    # From the end of the headers to the last byte of the body.
    body_timeout_seconds: float = 30.0
    # Idle time allowed between requests on a kept-alive connection.
    keep_alive_seconds: float = 5.0
    # Open connections from one client address; over it, its requests get 503 and the connection is closed.
    max_connections_per_client: int = 512
    # Gateway processes serving the port together (SO_REUSEPORT; from the environment, "auto" by default: see
    # _gateway_processes). Above 1, each takes its share of the port's limits (infra/gateway.py) and shares its
    # request counters and recent errors with the others through files under <data_dir>/gateways
    # (functions/frontend/siblings.py), so /metrics and the dashboard show the port's figures whichever answers.
    gateway_processes: int = 1
    # HTTPS for the local gateway: with both paths, that certificate and key; with tls on and no paths, a
    # self-signed certificate generated into <data_dir>/tls (infra/tls.py).
    tls: bool = False
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    # Where clients built by ferrymq.client reach the front end (FERRYMQ_ENDPOINT_URL): an API Gateway URL, a
    # proxy, or a gateway started on port 0. Unset: http(s)://host:port.
    endpoint_url: str | None = None

    # AWS resources.
    aws_endpoint_url: str | None = None
    # The port of the AWS stand-in `ferrymq up` starts (0: any free one), for firewalls and compose files.
    standin_port: int = 0
    # Queues `ferrymq up` creates or updates once it serves (`--queues`; infra/declared_queues.py).
    queues_file: Path | None = None
    table_prefix: str = "ferrymq-"
    usage_bucket: str = "ferrymq-usage"

    # Storage workers.
    data_dir: Path = field(default_factory=_default_data_dir)
    worker_host: str = "127.0.0.1"
    worker_port: int = 0
    # The port followers fetch from, advertised in a leader's claim when it differs from worker_port (a proxy or
    # a replication network in front of the worker); 0: worker_port. As with worker_port, `ferrymq up`'s
    # workers take it and the ports after it.
    worker_replication_port: int = 0
    # Each worker's admin HTTP listener (/health/live, /health/ready, /metrics), without authentication: keep it on
    # loopback or a private network. 0: any free port; a fixed port is `ferrymq up`'s first worker's, and the
    # others take the ports after it.
    worker_admin_host: str = "127.0.0.1"
    worker_admin_port: int = 0
    worker_id: str = "worker-1"
    partitions: int = 1
    group_commit_max_batch: int = 1024
    # Message bodies live in each partition's log on disk; a worker keeps this many bytes of recent ones in memory
    # (shared by its partitions), so that consumers keeping up never read the disk. 0: none.
    worker_body_cache_bytes: int = 32 * 1024 * 1024
    # A partition's log rolls to a new segment file at this size, and is compacted (its sealed segments folded
    # into a base holding only the live state) once it is at least `worker_compact_min_bytes` and more than
    # `worker_compact_ratio` times the live state, or mostly dead bytes.
    worker_segment_bytes: int = 64 * 1024 * 1024
    worker_compact_min_bytes: int = 128 * 1024 * 1024
    worker_compact_ratio: float = 4.0
    # Every this many bytes of log, a partition's state is written down while it serves (a checkpoint), so that a
    # start after a crash replays only the log since then. 0: only at a clean stop and with each compaction.
    # The interval stretches up to worker_checkpoint_max_bytes as the state grows, so that the CPU checkpoints
    # take stays under about 4 ms per MiB of log (a delta hashes the whole state: 0.8 s at ten million messages).
    worker_checkpoint_bytes: int = 32 * 1024 * 1024
    worker_checkpoint_max_bytes: int = 128 * 1024 * 1024
    # Every this many records of log as well, whatever their bytes (a drain's receives and deletes are tens of
    # bytes each, and replay at about 40 µs a record), stretched until replaying the records since the last
    # checkpoint would take about what it took. 0: only bytes count.
    worker_checkpoint_records: int = 8192
    # A worker whose event loop is held this long writes every thread's stack to its standard error, once per
    # stall, so that what held it is named. 0: off (arming the trace costs a thread start per loop-lag tick).
    worker_stall_trace_ms: int = 0
    # A group commit's write and fdatasync run on the worker's event loop (saving two thread wake-ups per commit)
    # while every sync takes less than this; one that takes longer sends them to the log's I/O thread for
    # worker_sync_calm_seconds, and a worker starts with them there for as long. 0: always the thread.
    worker_sync_on_loop_ms: float = 10.0
    worker_sync_calm_seconds: float = 10.0
    worker_connect_timeout_seconds: float = 5.0
    # Deadline of every worker RPC (a long poll gets its wait on top): a hung worker, unlike a dead one, never
    # closes the connection, so without one a request would wait for it forever.
    worker_request_timeout_seconds: float = 5.0
    # Bulkheads (ferrymq/bulkhead.py): DynamoDB calls of the front end run on threads of their own, this many
    # at once, each given up after the timeout; requests wait at most the wait for a free one. Each storage
    # worker takes at most `worker_max_in_flight` requests at once, and its circuit breaker opens after
    # `worker_breaker_failures` requests in a row went unanswered, for the cooldown.
    metadata_max_concurrent: int = 32
    metadata_timeout_seconds: float = 10.0
    dependency_wait_seconds: float = 1.0
    worker_max_in_flight: int = 4096
    worker_breaker_failures: int = 3
    worker_breaker_cooldown_seconds: float = 1.0
    # Replica sets: a leader renews its lease well within it; another in-sync replica may claim the partition
    # once it has lapsed. Workers heartbeat every interval (at most a third of the grace), and one silent for the
    # grace period is dead.
    leader_lease_seconds: float = 5.0
    # How long a push host's lease on an event-source mapping lasts unrenewed (docs/design/push-delivery.md).
    push_lease_seconds: float = 10.0
    # Networks (FERRYMQ_PUSH_ALLOWED_NETWORKS, comma-separated CIDRs) a push Destination may resolve into besides
    # public unicast addresses; empty: public addresses only (ferrymq.push.destinations). `ferrymq up` allows
    # loopback unless this is set.
    push_allowed_networks: tuple[str, ...] = ()
    worker_heartbeat_seconds: float = 3.0
    worker_grace_seconds: float = 10.0
    # The cluster a worker belongs to, and the shape `ferrymq up` gives a new one: how many workers, how many
    # replicas per partition, and when a write counts as acknowledged (leader | majority | all).
    cluster: str = "local"
    workers: int = 3
    # `ferrymq up` may run several clusters, each of `workers` workers and `partitions` partitions (the first is
    # `cluster`, the others `cluster`-1, -2, ...); new queues go to the one with the most room, and none takes
    # more than `cluster_max_queues` queues.
    clusters: int = 1
    cluster_max_queues: int = 100_000
    # Per-account limits (functions/metadata/account_quota.py): queues, and shards (a queue of FerryMQShardCount
    # n counts n), so that no tenant takes a cluster's room from the others; past either, CreateQueue and a
    # SetQueueAttributes growing shards are OverLimit. Every queue of the queue limit can be a plain one, with
    # room left to spread some (e.g. 15 queues of 64 shards); no account holds more than 2% of a default
    # cluster's room.
    account_max_queues: int = 1000
    account_max_shards: int = 2000
    replication_factor: int = 3
    acks: str = "majority"
    # The secret every worker RPC connection proves knowledge of (ferrymq/rpc/peer_auth.py), shared by all the
    # workers and front ends of a deployment: FERRYMQ_CLUSTER_SECRET, or the contents of the file named by
    # FERRYMQ_CLUSTER_SECRET_FILE. Empty: connections are not authenticated (workers warn at start).
    cluster_secret: str = field(default="", repr=False)
    # An in-sync follower that has not caught up with the leader's log for this long leaves the in-sync set
    # (while the rest still satisfy the acks mode): until then, every acknowledgement waits for it.
    replica_max_lag_seconds: float = 2.0
    # Leadership goes back to a partition's preferred replica once it has been in sync this long (0: never).
    leader_handover_seconds: float = 10.0
    # For testing only: storage workers read their wall clock this many ms off the system's (negative: behind),
    # to show that no decision depends on the clocks of two machines agreeing. Never set in production.
    worker_clock_skew_ms: int = 0

    # Usage records (ferrymq.usage): buffered, flushed every N seconds or M records, spooled to disk while the
    # bucket is unreachable. With a Firehose stream named, records go there instead of straight to S3.
    # Off unless asked for, so a Settings(...) built in a test uploads nothing; from_env() turns it on by default.
    usage_enabled: bool = False
    usage_flush_seconds: float = 10.0
    usage_flush_records: int = 5000
    usage_upload_attempts: int = 3
    # Default: <data_dir>/usage-spool.
    usage_spool_dir: Path | None = None
    # Names the front end in records; default <hostname>-<pid>.
    usage_instance: str = ""
    usage_firehose_stream: str | None = None

    # Request throttling (functions/frontend/throttle.py): token buckets refilled at these rates (requests per
    # second; 0 turns a bucket off), each holding up to throttle_burst_seconds of its rate. Per account, per
    # account and action, and per queue; FIFO queues get SQS's per-queue, per-action quota on message actions
    # (300/s, or the high-throughput quota with DeduplicationScope=messageGroup and
    # FifoThroughputLimit=perMessageGroupId). throttle_frontends front-end processes share every limit: each
    # takes an equal share.
    throttle_enabled: bool = True
    throttle_account_rate: float = 50_000.0
    throttle_action_rate: float = 20_000.0
    throttle_queue_rate: float = 20_000.0
    throttle_fifo_rate: float = 300.0
    throttle_fifo_high_throughput_rate: float = 70_000.0
    throttle_burst_seconds: float = 1.0
    throttle_frontends: int = 1

    # Server-side encryption (ferrymq.sse): the KMS key (alias, id or ARN) behind SqsManagedSseEnabled, created
    # on first use if missing; and, when above 0, a cap on how long a data key is reused or an unwrapped one is
    # kept, below the queue's KmsDataKeyReusePeriodSeconds (how soon a disabled key stops working).
    managed_sse_key: str = "alias/ferrymq/managed-sse"
    sse_key_cache_seconds: float = 0.0

    # Metrics (functions/frontend/metrics): the gateway's unsigned GET /metrics (off: it is refused like any
    # unsigned request); queue depths refreshed every metrics_collect_seconds (0: never) by asking the workers
    # about at most metrics_max_queues queues per refresh, taking the catalog in turns beyond that. The same
    # per-queue figures go to CloudWatch (PutMetricData) every cloudwatch_publish_seconds when cloudwatch_enabled
    # (off in a Settings(...) built by a test, on by default from the environment), under cloudwatch_namespace.
    metrics_enabled: bool = True
    metrics_collect_seconds: float = 15.0
    metrics_max_queues: int = 1000
    cloudwatch_enabled: bool = False
    cloudwatch_publish_seconds: float = 60.0
    cloudwatch_namespace: str = "AWS/SQS"

    # Logs (ferrymq/logs.py): "json" (one object per line) or "text"; None leaves the choice to the process
    # (JSON for the long-running ones, text for the CLI). The level is a logging level name; DEBUG also lets
    # the libraries' own INFO and DEBUG lines through.
    log_format: str | None = None
    log_level: str | None = None

    # The web dashboard (functions/frontend/dashboard) under /dashboard/ on the gateway: it always asks for a
    # login with an access key; dashboard_remote lets peers other than loopback reach it at all (off: 403).
    dashboard_enabled: bool = True
    dashboard_remote: bool = False

    @property
    def served_regions(self) -> frozenset[str]:
        """The regions a request's SigV4 credential scope may name."""
        if self.extra_regions:
            return frozenset((self.region, *self.extra_regions))
        # Imported here: botocore's region tables are needed by the front end only, not by every process.
        from ferrymq.regions import known_regions

        return known_regions() | {self.region}

    @property
    def queues_table(self) -> str:
        return f"{self.table_prefix}queues"

    @property
    def credentials_table(self) -> str:
        return f"{self.table_prefix}credentials"

    @property
    def partitions_table(self) -> str:
        return f"{self.table_prefix}partitions"

    @property
    def dedup_table(self) -> str:
        return f"{self.table_prefix}dedup"

    @property
    def workers_table(self) -> str:
        return f"{self.table_prefix}workers"

    @property
    def gateway_siblings_dir(self) -> Path:
        """Where the gateway processes of one port leave their counts for each other."""
        return self.data_dir / "gateways"

    @property
    def dashboard_sessions_table(self) -> str:
        return f"{self.table_prefix}dashboard-sessions"

    @property
    def usage_spool(self) -> Path:
        return self.usage_spool_dir or self.data_dir / "usage-spool"

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        defaults = cls()

        read: list[str] = []

        def get(name: str, default: str) -> str:
            read.append(name)
            return env.get(f"FERRYMQ_{name}", default)

        try:
            return cls._from(env, defaults, get)
        except ValueError as exc:
            if str(exc).startswith("FERRYMQ_") or not read:
                raise
            # Each value is converted as soon as it is read, so the last one read is the one that did not convert.
            raise ValueError(f"FERRYMQ_{read[-1]}: {exc}") from None

    @classmethod
    def _from(cls, env: Mapping[str, str], defaults: Settings, get: Callable[[str, str], str]) -> Settings:
        return cls(
            region=get("REGION", env.get("AWS_DEFAULT_REGION", defaults.region)),
            account_id=get("ACCOUNT_ID", defaults.account_id),
            dev_access_key=get("DEV_ACCESS_KEY", defaults.dev_access_key),
            dev_secret_key=get("DEV_SECRET_KEY", defaults.dev_secret_key),
            host=get("HOST", defaults.host),
            port=int(get("PORT", str(defaults.port))),
            queue_url_base=env.get("FERRYMQ_QUEUE_URL_BASE") or None,
            queue_url_form=get("QUEUE_URL_FORM", defaults.queue_url_form).lower(),
            metadata_cache_seconds=float(get("METADATA_CACHE_SECONDS", str(defaults.metadata_cache_seconds))),
            credentials_cache_seconds=float(
                get("CREDENTIALS_CACHE_SECONDS", str(defaults.credentials_cache_seconds))
            ),
            credentials_recheck_seconds=float(
                get("CREDENTIALS_RECHECK_SECONDS", str(defaults.credentials_recheck_seconds))
            ),
            credentials_negative_cache_seconds=float(
                get("CREDENTIALS_NEGATIVE_CACHE_SECONDS", str(defaults.credentials_negative_cache_seconds))
            ),
            extra_regions=tuple(r.strip() for r in get("REGIONS", "").split(",") if r.strip()),
            max_clock_skew_seconds=int(get("MAX_CLOCK_SKEW_SECONDS", str(defaults.max_clock_skew_seconds))),
            max_in_flight_standard=int(get("MAX_IN_FLIGHT_STANDARD", str(defaults.max_in_flight_standard))),
            max_in_flight_fifo=int(get("MAX_IN_FLIGHT_FIFO", str(defaults.max_in_flight_fifo))),
            max_request_bytes=int(get("MAX_REQUEST_BYTES", str(defaults.max_request_bytes))),
            unauthenticated_buffer_bytes=int(
                get("UNAUTHENTICATED_BUFFER_BYTES", str(defaults.unauthenticated_buffer_bytes))
            ),
            header_timeout_seconds=float(get("HEADER_TIMEOUT_SECONDS", str(defaults.header_timeout_seconds))),
            body_timeout_seconds=float(get("BODY_TIMEOUT_SECONDS", str(defaults.body_timeout_seconds))),
            keep_alive_seconds=float(get("KEEP_ALIVE_SECONDS", str(defaults.keep_alive_seconds))),
            max_connections_per_client=int(
                get("MAX_CONNECTIONS_PER_CLIENT", str(defaults.max_connections_per_client))
            ),
            gateway_processes=_gateway_processes(get("GATEWAY_PROCESSES", "auto"), os.cpu_count()),
            tls=get("TLS", "0").lower() not in ("0", "false", "no", "off", ""),
            tls_cert_file=Path(env["FERRYMQ_TLS_CERT_FILE"]) if env.get("FERRYMQ_TLS_CERT_FILE") else None,
            tls_key_file=Path(env["FERRYMQ_TLS_KEY_FILE"]) if env.get("FERRYMQ_TLS_KEY_FILE") else None,
            endpoint_url=env.get("FERRYMQ_ENDPOINT_URL") or None,
            aws_endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
            table_prefix=get("TABLE_PREFIX", defaults.table_prefix),
            usage_bucket=get("USAGE_BUCKET", defaults.usage_bucket),
            data_dir=Path(get("DATA_DIR", str(defaults.data_dir))),
            worker_host=get("WORKER_HOST", defaults.worker_host),
            standin_port=int(get("STANDIN_PORT", str(defaults.standin_port))),
            queues_file=Path(env["FERRYMQ_QUEUES_FILE"]) if env.get("FERRYMQ_QUEUES_FILE") else None,
            worker_port=int(get("WORKER_PORT", str(defaults.worker_port))),
            worker_replication_port=int(get("WORKER_REPLICATION_PORT", str(defaults.worker_replication_port))),
            worker_admin_host=get("WORKER_ADMIN_HOST", defaults.worker_admin_host),
            worker_admin_port=int(get("WORKER_ADMIN_PORT", str(defaults.worker_admin_port))),
            worker_id=get("WORKER_ID", defaults.worker_id),
            partitions=int(get("PARTITIONS", str(defaults.partitions))),
            group_commit_max_batch=int(get("GROUP_COMMIT_MAX_BATCH", str(defaults.group_commit_max_batch))),
            worker_body_cache_bytes=int(get("WORKER_BODY_CACHE_BYTES", str(defaults.worker_body_cache_bytes))),
            worker_segment_bytes=int(get("WORKER_SEGMENT_BYTES", str(defaults.worker_segment_bytes))),
            worker_compact_min_bytes=int(get("WORKER_COMPACT_MIN_BYTES", str(defaults.worker_compact_min_bytes))),
            worker_compact_ratio=float(get("WORKER_COMPACT_RATIO", str(defaults.worker_compact_ratio))),
            worker_checkpoint_bytes=int(get("WORKER_CHECKPOINT_BYTES", str(defaults.worker_checkpoint_bytes))),
            worker_checkpoint_max_bytes=int(
                get("WORKER_CHECKPOINT_MAX_BYTES", str(defaults.worker_checkpoint_max_bytes))
            ),
            worker_checkpoint_records=int(get("WORKER_CHECKPOINT_RECORDS", str(defaults.worker_checkpoint_records))),
            worker_stall_trace_ms=int(get("WORKER_STALL_TRACE_MS", str(defaults.worker_stall_trace_ms))),
            worker_sync_on_loop_ms=float(get("WORKER_SYNC_ON_LOOP_MS", str(defaults.worker_sync_on_loop_ms))),
            worker_sync_calm_seconds=float(
                get("WORKER_SYNC_CALM_SECONDS", str(defaults.worker_sync_calm_seconds))
            ),
            worker_connect_timeout_seconds=float(
                get("WORKER_CONNECT_TIMEOUT_SECONDS", str(defaults.worker_connect_timeout_seconds))
            ),
            worker_request_timeout_seconds=float(
                get("WORKER_REQUEST_TIMEOUT_SECONDS", str(defaults.worker_request_timeout_seconds))
            ),
            leader_lease_seconds=float(get("LEADER_LEASE_SECONDS", str(defaults.leader_lease_seconds))),
            push_lease_seconds=float(get("PUSH_LEASE_SECONDS", str(defaults.push_lease_seconds))),
            push_allowed_networks=_networks(get("PUSH_ALLOWED_NETWORKS", "")),
            worker_heartbeat_seconds=float(get("WORKER_HEARTBEAT_SECONDS", str(defaults.worker_heartbeat_seconds))),
            worker_grace_seconds=float(get("WORKER_GRACE_SECONDS", str(defaults.worker_grace_seconds))),
            cluster=get("CLUSTER", defaults.cluster),
            workers=int(get("WORKERS", str(defaults.workers))),
            replication_factor=int(get("REPLICATION_FACTOR", str(defaults.replication_factor))),
            clusters=int(get("CLUSTERS", str(defaults.clusters))),
            metadata_max_concurrent=int(get("METADATA_MAX_CONCURRENT", str(defaults.metadata_max_concurrent))),
            metadata_timeout_seconds=float(get("METADATA_TIMEOUT_SECONDS", str(defaults.metadata_timeout_seconds))),
            dependency_wait_seconds=float(get("DEPENDENCY_WAIT_SECONDS", str(defaults.dependency_wait_seconds))),
            worker_max_in_flight=int(get("WORKER_MAX_IN_FLIGHT", str(defaults.worker_max_in_flight))),
            worker_breaker_failures=int(get("WORKER_BREAKER_FAILURES", str(defaults.worker_breaker_failures))),
            worker_breaker_cooldown_seconds=float(
                get("WORKER_BREAKER_COOLDOWN_SECONDS", str(defaults.worker_breaker_cooldown_seconds))
            ),
            cluster_max_queues=int(get("CLUSTER_MAX_QUEUES", str(defaults.cluster_max_queues))),
            account_max_queues=int(get("ACCOUNT_MAX_QUEUES", str(defaults.account_max_queues))),
            account_max_shards=int(get("ACCOUNT_MAX_SHARDS", str(defaults.account_max_shards))),
            acks=get("ACKS", defaults.acks),
            cluster_secret=_cluster_secret(env),
            replica_max_lag_seconds=float(get("REPLICA_MAX_LAG_SECONDS", str(defaults.replica_max_lag_seconds))),
            leader_handover_seconds=float(get("LEADER_HANDOVER_SECONDS", str(defaults.leader_handover_seconds))),
            worker_clock_skew_ms=int(get("WORKER_CLOCK_SKEW_MS", str(defaults.worker_clock_skew_ms))),
            usage_enabled=get("USAGE_ENABLED", "1").lower() not in ("0", "false", "no", "off"),
            usage_flush_seconds=float(get("USAGE_FLUSH_SECONDS", str(defaults.usage_flush_seconds))),
            usage_flush_records=int(get("USAGE_FLUSH_RECORDS", str(defaults.usage_flush_records))),
            usage_upload_attempts=int(get("USAGE_UPLOAD_ATTEMPTS", str(defaults.usage_upload_attempts))),
            usage_spool_dir=Path(env["FERRYMQ_USAGE_SPOOL_DIR"]) if env.get("FERRYMQ_USAGE_SPOOL_DIR") else None,
            usage_instance=get("USAGE_INSTANCE", defaults.usage_instance),
            usage_firehose_stream=env.get("FERRYMQ_USAGE_FIREHOSE_STREAM") or None,
            throttle_enabled=get("THROTTLE_ENABLED", "1").lower() not in ("0", "false", "no", "off"),
            throttle_account_rate=float(get("THROTTLE_ACCOUNT_RATE", str(defaults.throttle_account_rate))),
            throttle_action_rate=float(get("THROTTLE_ACTION_RATE", str(defaults.throttle_action_rate))),
            throttle_queue_rate=float(get("THROTTLE_QUEUE_RATE", str(defaults.throttle_queue_rate))),
            throttle_fifo_rate=float(get("THROTTLE_FIFO_RATE", str(defaults.throttle_fifo_rate))),
            throttle_fifo_high_throughput_rate=float(
                get("THROTTLE_FIFO_HIGH_THROUGHPUT_RATE", str(defaults.throttle_fifo_high_throughput_rate))
            ),
            throttle_burst_seconds=float(get("THROTTLE_BURST_SECONDS", str(defaults.throttle_burst_seconds))),
            throttle_frontends=int(get("THROTTLE_FRONTENDS", str(defaults.throttle_frontends))),
            managed_sse_key=get("MANAGED_SSE_KEY", defaults.managed_sse_key),
            sse_key_cache_seconds=float(get("SSE_KEY_CACHE_SECONDS", str(defaults.sse_key_cache_seconds))),
            metrics_enabled=get("METRICS_ENABLED", "1").lower() not in ("0", "false", "no", "off"),
            metrics_collect_seconds=float(get("METRICS_COLLECT_SECONDS", str(defaults.metrics_collect_seconds))),
            metrics_max_queues=int(get("METRICS_MAX_QUEUES", str(defaults.metrics_max_queues))),
            cloudwatch_enabled=get("CLOUDWATCH_ENABLED", "1").lower() not in ("0", "false", "no", "off"),
            cloudwatch_publish_seconds=float(
                get("CLOUDWATCH_PUBLISH_SECONDS", str(defaults.cloudwatch_publish_seconds))
            ),
            cloudwatch_namespace=get("CLOUDWATCH_NAMESPACE", defaults.cloudwatch_namespace),
            log_format=get("LOG_FORMAT", "").strip() or None,
            log_level=get("LOG_LEVEL", "").strip() or None,
            dashboard_enabled=get("DASHBOARD_ENABLED", "1").lower() not in ("0", "false", "no", "off"),
            dashboard_remote=get("DASHBOARD_REMOTE", "0").lower() not in ("0", "false", "no", "off"),
        )
