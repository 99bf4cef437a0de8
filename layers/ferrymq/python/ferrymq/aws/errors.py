"""Turning botocore failures into FerryMQ errors, in one place for every adapter."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError

from ferrymq.errors import InternalError, ServiceUnavailable

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


@contextmanager
def outages_or_internal(what: str, log: logging.Logger) -> Iterator[None]:
    """Outages as :func:`translate_client_errors` reports them; any other ClientError is a fault of ours:
    logged (as ``what`` failing) and an InternalError to callers, which act on FerryMQ errors only (a move
    task waits on an outage, stops on anything else). A ClientError the block catches itself never gets here."""
    try:
        with translate_client_errors():
            yield
    except ClientError as exc:
        log.error("%s failed: %s", what, exc)
        raise InternalError() from None
