"""boto3 clients built one way everywhere.

Endpoints are left to boto3, which honours ``AWS_ENDPOINT_URL`` and ``AWS_ENDPOINT_URL_<SERVICE>``.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from ferrymq.settings import Settings

_CONFIG = Config(
    retries={"max_attempts": 3, "mode": "standard"},
    connect_timeout=5,
    read_timeout=30,
    s3={"addressing_style": "path"},
    max_pool_connections=32,
)


LEASE_CALL_SHARE = 4
"""A lease write's connect and read timeouts are each this fraction of the lease (one attempt, no retries)."""


def lease_config(lease_seconds: float) -> Config:
    """The botocore config for coordination calls that hold leases: one attempt, with connect and read timeouts
    of a quarter of the lease each, so that a call ends (answered or failed) within half the lease and the
    next renewal, a third of a lease later, is not held up; a call that failed is made again by the next
    controller pass, never by a hidden SDK retry that could outlast the lease."""
    share = max(lease_seconds / LEASE_CALL_SHARE, 0.05)
    return _CONFIG.merge(
        Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=share, read_timeout=share)
    )


def client(service: str, settings: Settings, *, config: Config | None = None) -> Any:
    """A boto3 client for ``service`` in the settings' region (``config``: instead of the default one, e.g.
    :func:`lease_config`)."""
    session = boto3.session.Session()
    return session.client(service, region_name=settings.region, config=config or _CONFIG)
