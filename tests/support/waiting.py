"""Waiting, in tests, for something that happens in another process."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(fetch: Callable[[], T], timeout: float = 20.0) -> T:
    """The first truthy value ``fetch()`` returns, asked every 0.2 s; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fetch()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("condition not reached in time")
