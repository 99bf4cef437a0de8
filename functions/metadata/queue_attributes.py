"""Queue attributes: which exist, their defaults and limits, and how values are checked.

Values are kept as SQS shows them: strings. Checking turns a client's value into that canonical string.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ferrymq.errors import InvalidAttributeName, InvalidAttributeValue


@dataclass(frozen=True, slots=True)
class IntRange:
    low: int
    high: int


_INT_ATTRIBUTES: dict[str, tuple[IntRange, int]] = {
    "DelaySeconds": (IntRange(0, 900), 0),
    "MaximumMessageSize": (IntRange(1024, 1_048_576), 1_048_576),
    "MessageRetentionPeriod": (IntRange(60, 1_209_600), 345_600),
    "ReceiveMessageWaitTimeSeconds": (IntRange(0, 20), 0),
    "VisibilityTimeout": (IntRange(0, 43_200), 30),
    "KmsDataKeyReusePeriodSeconds": (IntRange(60, 86_400), 300),
}

# Settable attributes that this release stores and reports but whose behaviour lives elsewhere.
_STRING_ATTRIBUTES = frozenset({"Policy", "RedrivePolicy", "RedriveAllowPolicy", "KmsMasterKeyId"})
_BOOL_ATTRIBUTES = frozenset({"SqsManagedSseEnabled"})
FIFO_ONLY = frozenset({"ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"})

READ_ONLY = frozenset(
    {
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
        "CreatedTimestamp",
        "LastModifiedTimestamp",
        "QueueArn",
    }
)

SETTABLE = frozenset(_INT_ATTRIBUTES) | _STRING_ATTRIBUTES | _BOOL_ATTRIBUTES | {"FifoQueue"} | FIFO_ONLY
ALL = SETTABLE | READ_ONLY

# What GetQueueAttributes reports for a standard queue that never set them.
DEFAULTS: dict[str, str] = {
    **{name: str(default) for name, (_, default) in _INT_ATTRIBUTES.items() if name != "KmsDataKeyReusePeriodSeconds"},
    "SqsManagedSseEnabled": "true",
}


def int_value(attributes: Mapping[str, str], name: str) -> int:
    """An integer attribute of a stored queue, falling back to its default."""
    value = attributes.get(name)
    return int(value) if value is not None else _INT_ATTRIBUTES[name][1]


def check(name: str, value: str) -> str:
    """The canonical form of a settable attribute's value, or the error SQS gives for it."""
    if name in _INT_ATTRIBUTES:
        limits = _INT_ATTRIBUTES[name][0]
        try:
            number = int(value.strip())
        except (ValueError, AttributeError):
            raise _invalid(name) from None
        if not limits.low <= number <= limits.high:
            raise _invalid(name)
        return str(number)
    if name in _BOOL_ATTRIBUTES or name in ("FifoQueue", "ContentBasedDeduplication"):
        lowered = value.lower()
        if lowered not in ("true", "false"):
            raise _invalid(name)
        return lowered
    if name in _STRING_ATTRIBUTES:
        return value
    if name == "DeduplicationScope":
        if value not in ("messageGroup", "queue"):
            raise _invalid(name)
        return value
    if name == "FifoThroughputLimit":
        if value not in ("perQueue", "perMessageGroupId"):
            raise _invalid(name)
        return value
    raise InvalidAttributeName(f"Unknown Attribute {name}.")


def check_settable(attributes: Mapping[str, str], *, fifo: bool) -> dict[str, str]:
    """Check a CreateQueue/SetQueueAttributes map; the result holds canonical values only."""
    out: dict[str, str] = {}
    for name, value in attributes.items():
        if name in READ_ONLY or name not in SETTABLE:
            raise InvalidAttributeName(f"Unknown Attribute {name}.")
        if not fifo and (name in FIFO_ONLY or name == "FifoQueue"):
            if name == "FifoQueue" and str(value).lower() == "false":
                continue
            raise InvalidAttributeName(f"Unknown Attribute {name}.")
        out[name] = check(name, value)
    return out


def _invalid(name: str) -> InvalidAttributeValue:
    return InvalidAttributeValue(f"Invalid value for the parameter {name}.")
