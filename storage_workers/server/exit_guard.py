"""A worker process that has stopped leaves, whatever a helper thread is still waiting on.

Once ``run_worker`` returns, every log is closed and synced and every listener closed. What can remain are threads
blocked in a network call (a DynamoDB request the coordination store answers slowly). The interpreter's exit waits
for them (asyncio's default executor, ``concurrent.futures``' exit hook) for as long as the call's timeout: a
stopping worker on a loaded machine was seen to outlast its supervisor's 10 s and be killed. Past a short grace the
process leaves with its exit status anyway; the threads' calls change nothing that matters to the next start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading

GRACE_SECONDS = 2.0


def exit_within(code: int, seconds: float = GRACE_SECONDS) -> threading.Timer:
    """Make the process exit with ``code`` in ``seconds`` if it has not by then (a daemon timer, which a normal
    exit does not wait for); returns the timer."""

    def leave() -> None:
        names = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon)
        logging.getLogger(__name__).warning(
            "stopped, but threads still wait on calls (%s); leaving without them", ", ".join(names) or "none"
        )
        for flushable in (sys.stdout, sys.stderr, *logging.getLogger().handlers):
            with contextlib.suppress(OSError, ValueError):
                flushable.flush()
        os._exit(code)

    timer = threading.Timer(seconds, leave)
    timer.daemon = True
    timer.start()
    return timer
