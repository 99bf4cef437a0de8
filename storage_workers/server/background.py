"""Work a worker does beside serving that may take its time: checks of sealed segments' bytes.

A start after a crash checks every sealed segment a checkpoint vouched for (6.3 GB per worker at ten million
messages) while the same cores must renew leases and answer the first requests, and on a machine like the local
stack's, run DynamoDB's stand-in too. Run flat out, three workers' checks took most of two cores for seconds (at
ten million messages, lease renewals timed out against the stand-in for about ten seconds then; paced, one did).
So this work runs on one thread per worker, one call after another, and each call keeps to :data:`CPU_SHARE` of a
core by sleeping between its reads (``crc_of``'s ``cpu_share``).

Not by a lower priority (nice 19) for the thread: it shares the interpreter's lock with the event loop, and a
thread the kernel deschedules while holding it holds the loop too. Tried: the starts' worst stalls went from
4-51 ms to 143-288 ms, with the loop's thread waiting on a pool thread caught in the middle of handing a result
back.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

CPU_SHARE = 0.25
"""The share of a core a worker's background work keeps to."""
P = ParamSpec("P")
T = TypeVar("T")


@functools.cache
def _executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(1, thread_name_prefix="ferrymq-background")


async def in_background(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` on the worker's background thread, after the calls given before it."""
    return await asyncio.get_running_loop().run_in_executor(_executor(), functools.partial(fn, *args, **kwargs))
