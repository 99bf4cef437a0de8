"""Dead-letter settings: the ``RedrivePolicy`` of a source queue and the ``RedriveAllowPolicy`` of a dead-letter queue.

Both are JSON documents carried in string attributes.  Checking one returns the document in the form SQS stores
and reports it, compact and with its keys in SQS's order, ``maxReceiveCount`` as a number however it was sent::

    {"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:dlq","maxReceiveCount":5}
    {"redrivePermission":"byQueue","sourceQueueArns":["arn:aws:sqs:us-east-1:000000000000:src"]}

Checks that need other queues (does the target exist, is it the same type, does it allow this source) belong to
the catalog; this module only reads documents.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ferrymq.arn import QueueArn, parse_arn, parse_queue_arn
from ferrymq.errors import InvalidParameterValue
from ferrymq.protocol.decoding import DocumentError, load_document, parse_int

MAX_RECEIVE_COUNT = (1, 1_000)
MAX_SOURCE_QUEUE_ARNS = 10
REDRIVE_PERMISSIONS = ("allowAll", "denyAll", "byQueue")
_UNSUPPORTED_ALLOW_POLICY = (
    "Invalid value for the parameter RedriveAllowPolicy. Reason: Amazon SQS can't create the redrive allow policy, "
    "as it\u2019s in an unsupported format."
)


@dataclass(frozen=True, slots=True)
class RedrivePolicy:
    dead_letter_target_arn: str
    max_receive_count: int

    @classmethod
    def from_json(cls, text: str) -> RedrivePolicy:
        """A stored (already checked) RedrivePolicy document."""
        document = json.loads(text)
        return cls(str(document["deadLetterTargetArn"]), int(document["maxReceiveCount"]))

    @property
    def target(self) -> QueueArn:
        target = parse_queue_arn(self.dead_letter_target_arn)
        if target is None:
            # Only checked policies are stored, so this is a damaged catalog item.
            raise ValueError(f"stored deadLetterTargetArn {self.dead_letter_target_arn!r} is not a queue ARN")
        return target

    def to_json(self) -> str:
        return json.dumps(
            {"deadLetterTargetArn": self.dead_letter_target_arn, "maxReceiveCount": self.max_receive_count},
            separators=(",", ":"),
        )


@dataclass(frozen=True, slots=True)
class RedriveAllowPolicy:
    permission: str
    source_queue_arns: tuple[str, ...] = ()

    def permits(self, source_arn: str) -> bool:
        """Whether a queue with ARN ``source_arn`` may name this dead-letter queue in its RedrivePolicy."""
        if self.permission == "allowAll":
            return True
        return self.permission == "byQueue" and source_arn in self.source_queue_arns

    def to_json(self) -> str:
        document: dict[str, Any] = {"redrivePermission": self.permission}
        if self.source_queue_arns:
            document["sourceQueueArns"] = list(self.source_queue_arns)
        return json.dumps(document, separators=(",", ":"))


# --- RedrivePolicy ---------------------------------------------------------------------------------------


def redrive_policy_error(raw: str, reason: str) -> InvalidParameterValue:
    return InvalidParameterValue(f"Value {raw} for parameter RedrivePolicy is invalid. Reason: {reason}")


def check_redrive_policy(raw: str) -> RedrivePolicy:
    """Read a RedrivePolicy a client sent, or raise SQS's error for it."""
    try:
        document = load_document(raw)
    except DocumentError:
        document = None
    if not isinstance(document, dict):
        raise InvalidParameterValue(
            "Invalid value for the parameter RedrivePolicy. Reason: Redrive policy is not a valid JSON map."
        )
    for mandatory in ("maxReceiveCount", "deadLetterTargetArn"):
        if mandatory not in document:
            raise redrive_policy_error(raw, f"Redrive policy does not contain mandatory attribute: {mandatory}.")
    if set(document) - {"maxReceiveCount", "deadLetterTargetArn"}:
        raise redrive_policy_error(
            raw, "Only following attributes are supported: [maxReceiveCount, deadLetterTargetArn]."
        )
    count = _receive_count(document["maxReceiveCount"])
    if count is None:
        raise redrive_policy_error(
            raw,
            f"Invalid value for maxReceiveCount: {document['maxReceiveCount']}, valid values are from "
            f"{MAX_RECEIVE_COUNT[0]} to {MAX_RECEIVE_COUNT[1]} both inclusive.",
        )
    arn = document["deadLetterTargetArn"]
    parsed = parse_arn(arn)
    if parsed is not None and parsed.service != "sqs":
        raise redrive_policy_error(raw, "Only SQS queues are valid resources for deadLetterTargetArn.")
    if parse_queue_arn(arn) is None:
        raise redrive_policy_error(raw, "Invalid value for deadLetterTargetArn.")
    return RedrivePolicy(dead_letter_target_arn=arn, max_receive_count=count)


def _receive_count(value: Any) -> int | None:
    # SQS takes the count as a JSON number or as a string of digits.
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        digits = value.strip()
        # The string form is digits alone, without a sign.
        value = parse_int(digits) if digits[:1] not in ("+", "-") else None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and MAX_RECEIVE_COUNT[0] <= value <= MAX_RECEIVE_COUNT[1]:
        return value
    return None


def stored_redrive_policy(attributes: dict[str, str]) -> RedrivePolicy | None:
    """The RedrivePolicy of a stored queue (stored documents are already checked), or None."""
    raw = attributes.get("RedrivePolicy")
    return RedrivePolicy.from_json(raw) if raw else None


# --- RedriveAllowPolicy ----------------------------------------------------------------------------------


def check_redrive_allow_policy(raw: str) -> RedriveAllowPolicy:
    """Read a RedriveAllowPolicy a client sent, or raise SQS's error for it."""
    try:
        document = load_document(raw)
    except DocumentError:
        document = None
    if (
        not isinstance(document, dict)
        or document.get("redrivePermission") not in REDRIVE_PERMISSIONS
        or set(document) - {"redrivePermission", "sourceQueueArns"}
    ):
        raise InvalidParameterValue(_UNSUPPORTED_ALLOW_POLICY)
    permission = document["redrivePermission"]
    arns = document.get("sourceQueueArns")
    if arns is not None and (not isinstance(arns, list) or not all(isinstance(a, str) for a in arns)):
        raise InvalidParameterValue(_UNSUPPORTED_ALLOW_POLICY)

    def refused(reason: str) -> InvalidParameterValue:
        return InvalidParameterValue(
            f"Value {raw} for parameter RedriveAllowPolicy is invalid. Reason: Amazon SQS can't create the redrive "
            f"allow policy. {reason}"
        )

    if permission != "byQueue":
        if arns:
            raise refused("To specify one or more source queue ARNs, you must set redrivePermission to byQueue.")
        return RedriveAllowPolicy(permission)
    if not arns:
        raise refused(
            "When you specify the byQueue permission type, you must also specify one or more sourceQueueArns values."
        )
    if len(arns) > MAX_SOURCE_QUEUE_ARNS:
        raise refused(f"The maximum number of source queue ARNs you can specify is {MAX_SOURCE_QUEUE_ARNS}.")
    return RedriveAllowPolicy(permission, tuple(arns))


def stored_redrive_allow_policy(attributes: dict[str, str]) -> RedriveAllowPolicy | None:
    """The RedriveAllowPolicy of a stored queue, or None (which allows every source of the same account)."""
    raw = attributes.get("RedriveAllowPolicy")
    if not raw:
        return None
    document = json.loads(raw)
    return RedriveAllowPolicy(str(document["redrivePermission"]), tuple(document.get("sourceQueueArns", ())))
