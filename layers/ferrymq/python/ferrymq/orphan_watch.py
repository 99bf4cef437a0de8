"""Noticing that the process which started us is gone.

A parent killed with SIGKILL cannot stop its children; they are handed to init and would serve on with
nobody to stop them. Long-running FerryMQ processes started by ``ferrymq up`` watch for that and stop as
they would on SIGTERM.

The parent is watched through a pidfd (Linux 5.3 and later), which becomes readable when it exits: an idle
process is not woken to look.  Looking at ``os.getppid()`` every :data:`POLL_SECONDS` instead, where no pidfd can
be had, costs two wake-ups a second in every process of the stack (about 0.03 % of a core each on the machine of
``README.md``'s figures).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

POLL_SECONDS = 0.5


async def wait_until_orphaned(parent_pid: int, stopping: Callable[[], bool]) -> bool:
    """True once ``parent_pid`` is no longer our parent; False if ``stopping()`` turned true first (looked at
    only where the parent is polled for: callers cancel the wait when they stop)."""
    try:
        pidfd = os.pidfd_open(parent_pid)
    except (AttributeError, OSError):
        return await _poll(parent_pid, stopping)
    loop = asyncio.get_running_loop()
    exited = loop.create_future()
    try:
        # Gone before the pidfd was opened: it may name another process by now.
        if os.getppid() != parent_pid:
            return True
        loop.add_reader(pidfd, lambda: exited.done() or exited.set_result(None))
        await exited
        return True
    finally:
        loop.remove_reader(pidfd)
        with contextlib.suppress(OSError):
            os.close(pidfd)


async def _poll(parent_pid: int, stopping: Callable[[], bool]) -> bool:
    while not stopping():
        if os.getppid() != parent_pid:
            return True
        await asyncio.sleep(POLL_SECONDS)
    return False
