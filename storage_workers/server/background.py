"""Work a worker does beside serving that may wait for the CPU: checks of sealed segments' bytes, and asking the
kernel for huge pages.

On a machine whose cores the workers, the front end and DynamoDB share, a start after a crash checks every sealed
segment a checkpoint vouched for (6.3 GB per worker at ten million messages), while the same cores must renew
leases and answer the first requests. Run at the process's priority, three workers' checks took most of two cores
for seconds, and lease renewals timed out against a DynamoDB stand-in on the same machine. So this work runs on one
thread per worker at the lowest priority (nice 19): it gets what the rest leaves, and all of a core when nothing
else wants it. Nothing that a request waits on runs here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

log = logging.getLogger(__name__)

LOWEST_PRIORITY = 19
P = ParamSpec("P")
T = TypeVar("T")


def lower_this_thread() -> None:
    """Give the calling thread the lowest CPU priority (Linux sets it per thread). Where it cannot be set, the
    thread keeps the process's, and nothing else changes."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_PRIORITY)


@functools.cache
def _executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(1, thread_name_prefix="ferrymq-background", initializer=lower_this_thread)


async def in_background(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` on the worker's background thread, one call after another."""
    return await asyncio.get_running_loop().run_in_executor(_executor(), functools.partial(fn, *args, **kwargs))
