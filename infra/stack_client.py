"""The clients the API-backed admin commands (``queues``, ``accounts``, ``keys``, ``usage``) talk to FerryMQ with.

Where: ``FERRYMQ_ENDPOINT_URL`` when set, else the gateway a running ``ferrymq up`` on ``FERRYMQ_DATA_DIR``
recorded (:mod:`ferrymq.infra.stack_endpoint`: found the way the stand-in is found, whatever port it picked), else
``FERRYMQ_HOST``:``FERRYMQ_PORT``. Who: the key ``FERRYMQ_DEV_ACCESS_KEY`` / ``FERRYMQ_DEV_SECRET_KEY``, the
admin key ``ferrymq up`` creates and prints; never boto3's own credential chain, whose keys (for AWS itself, or
the stand-in's) FerryMQ does not know. Retries are few and timeouts short: a command facing a stack that is
down should say so at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.config import Config

import ferrymq
from ferrymq.client import endpoint_url
from ferrymq.infra import stack_endpoint
from ferrymq.settings import Settings

_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 2}, connect_timeout=3, read_timeout=60)


class NoStack(RuntimeError):
    """No endpoint is known: no stack runs on the data directory and none was named."""


def resolve_endpoint(settings: Settings) -> str:
    if settings.endpoint_url:
        return settings.endpoint_url
    running = stack_endpoint.running(settings)
    if running:
        return running
    if settings.port == 0:
        raise NoStack(f"no FerryMQ is running on {settings.data_dir}: start `ferrymq up`, or set FERRYMQ_ENDPOINT_URL")
    return endpoint_url(settings)


@dataclass(frozen=True)
class StackClients:
    endpoint: str
    sqs: Any
    ferrymq: Any


def clients(settings: Settings) -> StackClients:
    """An SQS client and a FerryMQ client for the stack, both signing with the admin key."""
    endpoint = resolve_endpoint(settings)
    common: dict[str, Any] = {
        "settings": settings,
        "endpoint_url": endpoint,
        "region_name": settings.region,
        "aws_access_key_id": settings.dev_access_key,
        "aws_secret_access_key": settings.dev_secret_key,
        "config": _CONFIG,
    }
    return StackClients(endpoint, ferrymq.client("sqs", **common), ferrymq.client("ferrymq", **common))
