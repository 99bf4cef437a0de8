"""The one settings object, built once per entry point from ``FERRYMQ_*`` variables.

AWS endpoints are not FerryMQ settings: boto3 reads ``AWS_ENDPOINT_URL`` and
``AWS_ENDPOINT_URL_<SERVICE>`` itself, and :func:`ferrymq.aws.session.client` passes nothing that would
override them.  ``aws_endpoint_url`` is kept here only so the local stack can tell whether the user named
an endpoint (then it starts no stand-in).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ferrymq"


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
    metadata_cache_seconds: float = 30.0
    credentials_cache_seconds: float = 300.0
    max_clock_skew_seconds: int = 900
    # SQS's in-flight quotas; operators of a small deployment may lower them.
    max_in_flight_standard: int = 120_000
    max_in_flight_fifo: int = 20_000

    # AWS resources.
    aws_endpoint_url: str | None = None
    table_prefix: str = "ferrymq-"
    usage_bucket: str = "ferrymq-usage"

    # Storage workers.
    data_dir: Path = field(default_factory=_default_data_dir)
    worker_host: str = "127.0.0.1"
    worker_port: int = 0
    worker_id: str = "worker-1"
    partitions: int = 1
    group_commit_max_batch: int = 1024
    worker_connect_timeout_seconds: float = 5.0
    # Deadline of every worker RPC (a long poll gets its wait on top): a hung worker, unlike a dead one, never
    # closes the connection, so without one a request would wait for it forever.
    worker_request_timeout_seconds: float = 5.0
    # Replica sets: a leader renews its lease well within it; another in-sync replica may claim the partition
    # once it has lapsed. Workers heartbeat every interval, and one silent for the grace period is dead.
    leader_lease_seconds: float = 5.0
    worker_heartbeat_seconds: float = 1.0
    worker_grace_seconds: float = 10.0

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

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        defaults = cls()

        def get(name: str, default: str) -> str:
            return env.get(f"FERRYMQ_{name}", default)

        return cls(
            region=get("REGION", env.get("AWS_DEFAULT_REGION", defaults.region)),
            account_id=get("ACCOUNT_ID", defaults.account_id),
            dev_access_key=get("DEV_ACCESS_KEY", defaults.dev_access_key),
            dev_secret_key=get("DEV_SECRET_KEY", defaults.dev_secret_key),
            host=get("HOST", defaults.host),
            port=int(get("PORT", str(defaults.port))),
            queue_url_base=env.get("FERRYMQ_QUEUE_URL_BASE") or None,
            metadata_cache_seconds=float(get("METADATA_CACHE_SECONDS", str(defaults.metadata_cache_seconds))),
            credentials_cache_seconds=float(
                get("CREDENTIALS_CACHE_SECONDS", str(defaults.credentials_cache_seconds))
            ),
            max_clock_skew_seconds=int(get("MAX_CLOCK_SKEW_SECONDS", str(defaults.max_clock_skew_seconds))),
            max_in_flight_standard=int(get("MAX_IN_FLIGHT_STANDARD", str(defaults.max_in_flight_standard))),
            max_in_flight_fifo=int(get("MAX_IN_FLIGHT_FIFO", str(defaults.max_in_flight_fifo))),
            aws_endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
            table_prefix=get("TABLE_PREFIX", defaults.table_prefix),
            usage_bucket=get("USAGE_BUCKET", defaults.usage_bucket),
            data_dir=Path(get("DATA_DIR", str(defaults.data_dir))),
            worker_host=get("WORKER_HOST", defaults.worker_host),
            worker_port=int(get("WORKER_PORT", str(defaults.worker_port))),
            worker_id=get("WORKER_ID", defaults.worker_id),
            partitions=int(get("PARTITIONS", str(defaults.partitions))),
            group_commit_max_batch=int(get("GROUP_COMMIT_MAX_BATCH", str(defaults.group_commit_max_batch))),
            worker_connect_timeout_seconds=float(
                get("WORKER_CONNECT_TIMEOUT_SECONDS", str(defaults.worker_connect_timeout_seconds))
            ),
            worker_request_timeout_seconds=float(
                get("WORKER_REQUEST_TIMEOUT_SECONDS", str(defaults.worker_request_timeout_seconds))
            ),
            leader_lease_seconds=float(get("LEADER_LEASE_SECONDS", str(defaults.leader_lease_seconds))),
            worker_heartbeat_seconds=float(get("WORKER_HEARTBEAT_SECONDS", str(defaults.worker_heartbeat_seconds))),
            worker_grace_seconds=float(get("WORKER_GRACE_SECONDS", str(defaults.worker_grace_seconds))),
        )
