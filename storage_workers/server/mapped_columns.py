"""The pages of checkpoints a start mapped into the message tables, copied into the worker's own memory, paced.

A start maps its checkpoint's chunks into the tables' columns instead of reading them (``log.mapped_chunks``), so it
answers without first paying for a copy of its state. But a mapped file keeps its disk space while it is mapped,
and a checkpoint's files are replaced as the worker writes new ones: left mapped, a worker would hold every base it
ever started from. So once a start has loaded, this task puts memory of the worker's own, holding the same bytes,
in place of what was mapped, a step of :data:`STEP_BYTES` at a time on the event loop (the only thread that writes
the tables: a row written between a step's copy and its mapping would be lost), keeping to
:data:`~.background.CPU_SHARE` of a core by sleeping between steps. A step of 2 MiB takes about a millisecond.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from ferrymq.storage.engine import columns
from ferrymq.storage.log import mapped_chunks
from ferrymq.storage.server.background import CPU_SHARE

log = logging.getLogger(__name__)

STEP_BYTES = columns.HUGE_PAGE_BYTES
"""A huge page: a step copies whole ones where it can (``log.mapped_chunks.copy_mapped``)."""
START_DELAY_SECONDS = 15.0
"""How long after a load its copy waits: a start's first seconds have every worker load, replay and check its
sealed segments on the same cores (at ten million messages, a copy begun at once put a worker's loop 123 ms
behind, waiting for a CPU), and a mapped file costs nothing until a new base replaces it."""


class MappedColumns:
    """Copies what loads mapped, after each load (module docstring). One per worker: the mappings are the
    process's, whichever partition's load made them."""

    def __init__(self, *, step_bytes: int = STEP_BYTES, cpu_share: float = CPU_SHARE,
                 start_delay: float | None = None) -> None:
        self.step_bytes = step_bytes
        self.cpu_share = cpu_share
        self.start_delay = start_delay
        """Seconds; None: :data:`START_DELAY_SECONDS` as it is when a copy starts."""
        self.copied_bytes = 0
        """Bytes copied since the worker started."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Copy what is mapped, unless a pass runs already or nothing is; outside a running loop (a worker opening
        its replicas before it serves), nothing yet: the worker starts it again once it serves."""
        if self._task is not None and not self._task.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if mapped_chunks.mapped_bytes():
            self._task = loop.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        await asyncio.sleep(START_DELAY_SECONDS if self.start_delay is None else self.start_delay)
        started, spent, copied = time.monotonic(), 0.0, 0
        left = mapped_chunks.mapped_bytes()
        while left:
            before, cpu = left, time.thread_time()
            left = mapped_chunks.copy_mapped(self.step_bytes)
            step = time.thread_time() - cpu
            spent += step
            # A load off the loop may have mapped more meanwhile: only what went is counted.
            copied += max(0, before - left)
            await asyncio.sleep(max(step * (1 / self.cpu_share - 1), 0.001))
        self.copied_bytes += copied
        log.info("checkpoint pages mapped by a load: %.1f MiB copied into the worker's own memory in %.1f s "
                 "(%.2f s on a CPU)", copied / 2**20, time.monotonic() - started, spent)
