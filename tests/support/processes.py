"""Stopping the process groups tests start, so nothing a test launched outlives it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


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


def group_members(pid: int) -> dict[int, list[str]]:
    """The processes in ``pid``'s process group now: pid -> argv."""
    return members_of_group(os.getpgid(pid))


def members_of_group(group: int) -> dict[int, list[str]]:
    """The processes in process group ``group`` now (its leader may be gone): pid -> argv."""
    found: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != group:
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (ProcessLookupError, FileNotFoundError, PermissionError):
            continue
        found[int(entry.name)] = [part.decode(errors="replace") for part in argv if part]
    return found


def stop_process(pid: int, timeout: float = 5.0) -> None:
    """SIGSTOP ``pid`` and return once every one of its threads is stopped: the signal is only queued when
    ``kill`` returns, and a thread on the other core may still write a file for a moment after."""
    os.kill(pid, signal.SIGSTOP)
    tasks = Path(f"/proc/{pid}/task")
    deadline = time.monotonic() + timeout
    while not all(_state(task) in ("T", "t", None) for task in tasks.iterdir()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} did not stop within {timeout} s")
        time.sleep(0.01)


def _state(task: Path) -> str | None:
    """A thread's state letter from its ``stat`` (after the parenthesised name, which may hold spaces), or
    None when the thread has gone."""
    try:
        stat = (task / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]
