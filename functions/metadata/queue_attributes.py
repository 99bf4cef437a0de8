"""Queue attributes: which exist, their defaults and limits, and how values are checked and combined.

Values are kept as SQS shows them: strings.  Checking turns a client's value into that canonical string (JSON
documents included, see :mod:`ferrymq.metadata.redrive`).  For ``Policy``, ``RedrivePolicy``,
``RedriveAllowPolicy`` and ``KmsMasterKeyId`` an empty string means "remove it".

Rules that span attributes live in :func:`combined`: server-side encryption is either SSE-SQS or SSE-KMS, and a
FIFO queue's ``perMessageGroupId`` throughput limit needs ``messageGroup`` deduplication.  Rules that need other
queues (dead-letter targets) live in the catalog.

``FerryMQShardCount`` is FerryMQ's own: over how many partitions the queue is spread (see
``docs/design/sharded-queues.md``).  It is reported when asked for by name, and with ``All`` once above 1,
so a queue that never uses it answers exactly as SQS's do.  ``FerryMQPriorityLevels`` (how many message
priority levels, 1 = off; ``docs/design/priorities.md``) is reported the same way; FIFO queues take only 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ferrymq.errors import InvalidAttributeName, InvalidAttributeValue, InvalidParameterValue
from ferrymq.limits import (
    DEFAULT_RETENTION_SECONDS,
    MAX_DELAY_SECONDS,
    MAX_MESSAGE_BYTES,
    MAX_RETENTION_SECONDS,
    MAX_SHARDS,
    MAX_VISIBILITY_TIMEOUT_SECONDS,
    MAX_WAIT_TIME_SECONDS,
    MIN_RETENTION_SECONDS,
)
from ferrymq.metadata import policy, redrive
from ferrymq.priorities import LEVELS_ATTRIBUTE, MAX_LEVELS
from ferrymq.protocol.decoding import parse_int


@dataclass(frozen=True, slots=True)
class IntRange:
    low: int
    high: int


_INT_ATTRIBUTES: dict[str, tuple[IntRange, int]] = {
    "DelaySeconds": (IntRange(0, MAX_DELAY_SECONDS), 0),
    "MaximumMessageSize": (IntRange(1024, MAX_MESSAGE_BYTES), MAX_MESSAGE_BYTES),
    "MessageRetentionPeriod": (IntRange(MIN_RETENTION_SECONDS, MAX_RETENTION_SECONDS), DEFAULT_RETENTION_SECONDS),
    "ReceiveMessageWaitTimeSeconds": (IntRange(0, MAX_WAIT_TIME_SECONDS), 0),
    "VisibilityTimeout": (IntRange(0, MAX_VISIBILITY_TIMEOUT_SECONDS), 30),
    "KmsDataKeyReusePeriodSeconds": (IntRange(60, 86_400), 300),
    "FerryMQShardCount": (IntRange(1, MAX_SHARDS), 1),
    LEVELS_ATTRIBUTE: (IntRange(1, MAX_LEVELS), 1),
}
SHARD_COUNT = "FerryMQShardCount"
PRIORITY_LEVELS = LEVELS_ATTRIBUTE
_NOT_DEFAULTED = frozenset({"KmsDataKeyReusePeriodSeconds", SHARD_COUNT, PRIORITY_LEVELS})

# Attributes an empty value removes.
REMOVABLE = frozenset({"Policy", "RedrivePolicy", "RedriveAllowPolicy", "KmsMasterKeyId"})
_BOOL_ATTRIBUTES = frozenset({"SqsManagedSseEnabled", "FifoQueue", "ContentBasedDeduplication"})
FIFO_ONLY = frozenset({"ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit"})
_CHOICES: dict[str, tuple[str, ...]] = {
    "DeduplicationScope": ("messageGroup", "queue"),
    "FifoThroughputLimit": ("perQueue", "perMessageGroupId"),
}

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

SETTABLE = frozenset(_INT_ATTRIBUTES) | REMOVABLE | _BOOL_ATTRIBUTES | frozenset(_CHOICES)
ALL = SETTABLE | READ_ONLY

# What GetQueueAttributes reports for a standard queue that never set them.  The KMS data key reuse period is
# reported only once a KMS key is in use.
DEFAULTS: dict[str, str] = {
    **{name: str(default) for name, (_, default) in _INT_ATTRIBUTES.items() if name not in _NOT_DEFAULTED},
    "SqsManagedSseEnabled": "true",
}
# ... and, in addition, for a FIFO queue.
FIFO_DEFAULTS: dict[str, str] = {
    "FifoQueue": "true",
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "queue",
    "FifoThroughputLimit": "perQueue",
}
_NOT_FIFO = {
    name: f"You can specify the {name} only when FifoQueue is set to true."
    for name in ("DeduplicationScope", "FifoThroughputLimit")
}
_SSE_CONFLICT = (
    "You can use one type of server-side encryption (SSE) at one time. You can either enable KMS SSE or SQS SSE."
)


def int_value(attributes: Mapping[str, str], name: str) -> int:
    """An integer attribute of a stored queue, falling back to its default."""
    value = attributes.get(name)
    return int(value) if value is not None else _INT_ATTRIBUTES[name][1]


def dedup_scope(attributes: Mapping[str, str]) -> str:
    """A FIFO queue's DeduplicationScope: ``queue`` or ``messageGroup``."""
    return attributes.get("DeduplicationScope", FIFO_DEFAULTS["DeduplicationScope"])


def defaults(*, fifo: bool) -> dict[str, str]:
    return {**DEFAULTS, **FIFO_DEFAULTS} if fifo else dict(DEFAULTS)


def applicable(*, fifo: bool) -> frozenset[str]:
    """The attribute names a queue of this type knows."""
    return ALL if fifo else ALL - FIFO_ONLY - {"FifoQueue"}


def reported(attributes: Mapping[str, str], *, fifo: bool) -> dict[str, str]:
    """The settable attributes GetQueueAttributes shows for a queue storing ``attributes``."""
    values = {**defaults(fifo=fifo), **attributes}
    if "KmsMasterKeyId" in values:
        values.setdefault("KmsDataKeyReusePeriodSeconds", str(_INT_ATTRIBUTES["KmsDataKeyReusePeriodSeconds"][1]))
    else:
        # Without a KMS key AWS shows no reuse period, even one set before the key was removed.
        values.pop("KmsDataKeyReusePeriodSeconds", None)
    for own in (SHARD_COUNT, PRIORITY_LEVELS):
        if values.get(own) == "1":
            del values[own]
    return values


def check(name: str, value: str) -> str:
    """The canonical form of a settable attribute's value, or the error SQS gives for it."""
    if not isinstance(value, str):
        # A query list item with sub-keys but no value of its own (``Attribute.1.Value.x=``) decodes to None.
        raise _invalid(name)
    if name in _INT_ATTRIBUTES:
        limits = _INT_ATTRIBUTES[name][0]
        number = parse_int(value.strip()) if isinstance(value, str) else None
        if number is None or not limits.low <= number <= limits.high:
            raise _invalid(name)
        return str(number)
    if name in _BOOL_ATTRIBUTES:
        lowered = value.lower()
        if lowered not in ("true", "false"):
            raise _invalid(name)
        return lowered
    if name in _CHOICES:
        if value not in _CHOICES[name]:
            raise _invalid(name)
        return value
    if name in REMOVABLE and value == "":
        return ""
    if name == "Policy":
        return policy.check_policy(value)
    if name == "RedrivePolicy":
        return redrive.check_redrive_policy(value).to_json()
    if name == "RedriveAllowPolicy":
        return redrive.check_redrive_allow_policy(value).to_json()
    if name == "KmsMasterKeyId":
        return value
    raise InvalidAttributeName(f"Unknown Attribute {name}.")


def check_settable(attributes: Mapping[str, str], *, fifo: bool) -> dict[str, str]:
    """Check a CreateQueue/SetQueueAttributes map; the result holds canonical values only."""
    out: dict[str, str] = {}
    for name, value in attributes.items():
        if name in READ_ONLY or name not in SETTABLE:
            raise InvalidAttributeName(f"Unknown Attribute {name}.")
        if not fifo and (name in FIFO_ONLY or name == "FifoQueue"):
            # AWS refuses even FifoQueue=false on a standard queue, and words two of these its own way.
            raise InvalidAttributeName(_NOT_FIFO.get(name, f"Unknown Attribute {name}."))
        out[name] = check(name, value)
        if fifo and name == PRIORITY_LEVELS and out[name] != "1":
            raise InvalidAttributeValue(
                f"Invalid value for the parameter {PRIORITY_LEVELS}. Reason: FIFO queues deliver each message "
                "group in order and take no priority levels; only 1 is allowed."
            )
    return out


def combined(current: Mapping[str, str], wanted: Mapping[str, str], *, fifo: bool) -> dict[str, str]:
    """The attributes to store when checked values ``wanted`` are applied to a queue storing ``current``."""
    if wanted.get("SqsManagedSseEnabled") == "true" and wanted.get("KmsMasterKeyId"):
        raise InvalidAttributeName(_SSE_CONFLICT)
    out = {**current, **wanted}
    for name in REMOVABLE:
        if out.get(name) == "":
            del out[name]
    if wanted.get("KmsMasterKeyId"):
        # Choosing a KMS key turns SSE-SQS off; turning SSE-SQS on drops the key.
        out["SqsManagedSseEnabled"] = "false"
    elif wanted.get("SqsManagedSseEnabled") == "true":
        out.pop("KmsMasterKeyId", None)
    if fifo:
        effective = {**FIFO_DEFAULTS, **out}
        per_group = effective["FifoThroughputLimit"] == "perMessageGroupId"
        if per_group and effective["DeduplicationScope"] != "messageGroup":
            raise InvalidParameterValue(
                "The perMessageGroupId value is allowed only when the value for DeduplicationScope is messageGroup"
            )
    return out


def differing(stored: Mapping[str, str], wanted: Mapping[str, str], *, fifo: bool) -> set[str]:
    """The names in ``wanted`` (checked values of a repeated CreateQueue) that the stored queue does not match."""
    have = {SHARD_COUNT: "1", PRIORITY_LEVELS: "1", **reported(stored, fifo=fifo)}
    return {name for name, value in wanted.items() if have.get(name, "") != value}


def _invalid(name: str) -> InvalidAttributeValue:
    return InvalidAttributeValue(f"Invalid value for the parameter {name}.")
