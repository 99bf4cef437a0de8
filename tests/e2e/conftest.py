"""The end-to-end tests run against whole stacks: the ``stack``, ``private_stack``, ``protocol`` and ``sqs``
fixtures come from :mod:`tests.support.stack` (a plugin of the root conftest, so that the fuzz tests share
the session's stack); ``Stack`` is importable from here too, and so are the SDK tests' ``sdk`` client and
``new_queue``."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import ferrymq
from tests.support.stack import Stack

__all__ = ["Stack", "new_queue", "sdk"]


@pytest.fixture
def sdk(stack: Stack) -> Any:
    """``ferrymq.client("sqs")`` for the session's stack."""
    return ferrymq.client("sqs", endpoint_url=stack.endpoint, region_name=stack.region,
                          aws_access_key_id=stack.access_key, aws_secret_access_key=stack.secret_key)


def new_queue(sqs: Any, prefix: str, *, fifo: bool = False, **attributes: str) -> str:
    """A queue of a name of its own (``prefix`` and a random suffix); returns its URL."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}" + (".fifo" if fifo else "")
    if fifo:
        attributes["FifoQueue"] = "true"
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])
