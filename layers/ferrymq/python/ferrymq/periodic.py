"""A step run every so many seconds on the event loop, in a task of its own, until closed."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Periodic:
    """Runs ``step`` (a function or a coroutine function) now (or, with ``first_wait``, after ``seconds``) and then
    every ``seconds`` after each run ends; a run that fails is logged as ``what``, with the error behind it when it
    wraps one, and the next one comes as usual."""

    def __init__(self, what: str, seconds: float, step: Callable[[], Awaitable[None] | None], *,
                 first_wait: bool = False) -> None:
        self.what = what
        self.seconds = seconds
        self._step = step
        self._first_wait = first_wait
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        if self._first_wait:
            await asyncio.sleep(self.seconds)
        while True:
            try:
                done = self._step()
                if inspect.isawaitable(done):
                    await done
            except Exception as exc:
                log.warning("%s failed: %r", self.what, exc.__cause__ or exc)
            await asyncio.sleep(self.seconds)
