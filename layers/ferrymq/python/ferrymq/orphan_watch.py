"""Noticing that the process which started us is gone.

A parent killed with SIGKILL cannot stop its children; they are handed to init and would serve on with
nobody to stop them. Long-running FerryMQ processes started by ``ferrymq up`` watch for that and stop as
they would on SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

POLL_SECONDS = 0.5


async def wait_until_orphaned(parent_pid: int, stopping: Callable[[], bool]) -> bool:
    """True once ``parent_pid`` is no longer our parent; False if ``stopping()`` turned true first."""
    while not stopping():
        if os.getppid() != parent_pid:
            return True
        await asyncio.sleep(POLL_SECONDS)
    return False
