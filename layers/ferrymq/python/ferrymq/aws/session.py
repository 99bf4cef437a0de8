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


def client(service: str, settings: Settings) -> Any:
    """A boto3 client for ``service`` in the settings' region."""
    session = boto3.session.Session()
    return session.client(service, region_name=settings.region, config=_CONFIG)
