"""Queue URLs: ``<base>/<account>/<name>``, as SQS and LocalStack form them."""

from __future__ import annotations

from urllib.parse import urlsplit

from ferrymq.arn import parse_queue_arn
from ferrymq.errors import InvalidAddress, InvalidParameterValue


def queue_url(base: str, account: str, name: str) -> str:
    return f"{base.rstrip('/')}/{account}/{name}"


def split_queue_url(url: str) -> tuple[str, str]:
    """(account, name) named by a queue URL; any host is accepted, as clients may reach us by many names."""
    path = urlsplit(url).path if "://" in url else url
    parts = [p for p in path.split("/") if p]
    if len(parts) != 2 or not parts[0].isdigit() or len(parts[0]) != 12:
        raise InvalidAddress(f"The address {url} is not valid for this endpoint.")
    return parts[0], parts[1]


def split_queue_arn(arn: str) -> tuple[str, str]:
    """(account, name) named by a queue ARN ``arn:aws:sqs:<region>:<account>:<name>``."""
    parsed = parse_queue_arn(arn)
    if parsed is None:
        raise InvalidParameterValue(f"Value {arn} for parameter ARN is invalid.")
    return parsed.account, parsed.name
