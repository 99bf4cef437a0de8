"""AWS clients for tests that need an AWS endpoint to be unreachable."""

from __future__ import annotations

import socket
from typing import Any

import boto3
from botocore.config import Config


def unreachable_dynamodb() -> Any:
    """A DynamoDB client pointed at a loopback port nothing listens on, failing fast (one attempt, 1 s)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return boto3.client(
        "dynamodb",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}, connect_timeout=1, read_timeout=1),
    )
