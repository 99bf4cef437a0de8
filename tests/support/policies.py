"""Queues with policies for the policy tests: a new queue with its ARN, and a policy document set on it."""

from __future__ import annotations

import json
import uuid
from typing import Any


def queue_with_arn(sqs: Any, prefix: str) -> tuple[str, str]:
    """A new queue's URL and ARN."""
    url = sqs.create_queue(QueueName=f"{prefix}-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def set_policy(sqs: Any, url: str, *statements: dict[str, Any]) -> None:
    """Set a 2012-10-17 policy of ``statements`` on the queue at ``url``."""
    sqs.set_queue_attributes(QueueUrl=url, Attributes={
        "Policy": json.dumps({"Version": "2012-10-17", "Statement": list(statements)})})
