"""Queue ARNs, ``arn:aws:sqs:<region>:<account>:<name>``: read and written here for the front end and the workers.

Reading answers None for text that is not a queue ARN rather than raising: SQS words a bad ARN differently
for each parameter that carries one, so each caller raises its own error.

FerryMQ names its queues in the ``aws`` partition.  An ARN of another AWS partition still reads as a queue
ARN (a RedrivePolicy naming one is checked like any other and then not found), and the partition takes no
part in finding a queue.
"""

from __future__ import annotations

import re
from typing import NamedTuple

PARTITION = "aws"
PARTITIONS = frozenset({"aws", "aws-cn", "aws-us-gov"})
_ACCOUNT = re.compile(r"[0-9]{12}")


class Arn(NamedTuple):
    """Any resource's ARN, split into its parts; ``resource`` may itself contain colons."""

    partition: str
    service: str
    region: str
    account: str
    resource: str


class QueueArn(NamedTuple):
    region: str
    account: str
    name: str

    def __str__(self) -> str:
        return f"arn:{PARTITION}:sqs:{self.region}:{self.account}:{self.name}"


def parse_arn(text: object) -> Arn | None:
    """The parts of ``text`` when it is an ARN of a known partition with every part filled in, else None."""
    if not isinstance(text, str):
        return None
    parts = text.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or parts[1] not in PARTITIONS or not all(parts[2:]):
        return None
    return Arn(parts[1], parts[2], parts[3], parts[4], parts[5])


def parse_queue_arn(text: object) -> QueueArn | None:
    """The queue named by ``text``, or None when it is not a queue ARN (of a 12-digit account)."""
    arn = parse_arn(text)
    if arn is None or arn.service != "sqs" or not _ACCOUNT.fullmatch(arn.account) or ":" in arn.resource:
        return None
    return QueueArn(arn.region, arn.account, arn.resource)


def queue_arn(region: str, account: str, name: str) -> str:
    return str(QueueArn(region, account, name))
