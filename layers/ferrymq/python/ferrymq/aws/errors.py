"""Turning botocore failures into FerryMQ errors, in one place for every adapter."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError

from ferrymq.errors import ServiceUnavailable

_UNAVAILABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "ResourceNotFoundException",
    }
)


@contextmanager
def translate_client_errors() -> Iterator[None]:
    """Map transport failures and AWS-side outages to ``ServiceUnavailable``; other ClientErrors pass through.

    A missing table (ResourceNotFoundException) means the stack is not bootstrapped: to a client that is an
    unavailable service, not a fault of its request.
    """
    try:
        yield
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in _UNAVAILABLE_CODES:
            raise ServiceUnavailable() from exc
        raise
    except BotoCoreError as exc:
        raise ServiceUnavailable() from exc
