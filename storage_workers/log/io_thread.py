"""The log writer's I/O thread: one thread running the calls handed to it, in order, each outcome handed back
to the event loop with ``call_soon_threadsafe``.

A ``ThreadPoolExecutor`` with ``run_in_executor`` does the same for the price of a concurrent future, its lock
and condition, an asyncio future chained to it and their callbacks, per call; the group commit makes one call
per batch, and at low load every message is a batch of its own, so that price was paid per message.  Here a
call is one queue put, one wake-up of the thread and one wake-up of the loop.

The thread is a daemon: a process that exits without closing its logs loses only what was never
acknowledged (no reply waits for less than the fsync this thread returns from).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any

Done = Callable[[Any, BaseException | None], None]
"""``done(result, error)``, run in the event loop: ``error`` is None when the call returned ``result``."""

_Call = tuple[asyncio.AbstractEventLoop, Callable[..., Any], tuple[Any, ...], Done]


class IoThread:
    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: SimpleQueue[_Call | None] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._shut = False
        # A writer dropped without being closed must not leave its thread waiting for good.
        weakref.finalize(self, self._queue.put, None)

    def submit(
        self, loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], args: tuple[Any, ...], done: Done
    ) -> None:
        """Run ``fn(*args)`` after every call submitted before it; ``done`` is then called in ``loop``."""
        if self._shut:
            raise RuntimeError(f"I/O thread {self.name} is shut down")
        if self._thread is None:
            # The thread holds the queue alone, not this object, which may then be collected.
            self._thread = threading.Thread(target=_run, args=(self._queue,), name=self.name, daemon=True)
            self._thread.start()
        self._queue.put((loop, fn, args, done))

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` in turn and return what it returned (or raise what it raised)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()

        def done(result: Any, error: BaseException | None) -> None:
            if fut.done():
                return
            if error is None:
                fut.set_result(result)
            else:
                fut.set_exception(error)

        self.submit(loop, fn, args, done)
        return await fut

    def shutdown(self) -> None:
        """Let the calls submitted so far run, then end the thread (waits for it)."""
        self._shut = True
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()


def _run(queue: SimpleQueue[_Call | None]) -> None:
    get = queue.get
    while True:
        item = get()
        if item is None:
            return
        loop, fn, args, done = item
        try:
            result, error = fn(*args), None
        except BaseException as exc:  # handed to the loop, which decides what a failed call means
            result, error = None, exc
        # A loop closed meanwhile has no one left to tell.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(done, result, error)
