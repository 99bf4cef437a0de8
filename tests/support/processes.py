"""Stopping the process groups tests start, so nothing a test launched outlives it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def terminate_group(process: subprocess.Popen, timeout: float) -> None:
    """SIGTERM ``process`` and give it ``timeout`` seconds to stop its own children; then SIGKILL whatever
    is left of its process group (it must have been started with ``start_new_session=True``)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout)
    kill_group(process)


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the whole process group at once, as a power cut would, and reap the leader."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
