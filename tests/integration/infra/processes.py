"""Starting FerryMQ's processes in integration tests: wait for the ready line, always stop them."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from ferrymq.infra.standin.access_keys import KeyPair

READY_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0


class Started:
    """A process that printed its ready line; ``output`` collects everything else it prints."""

    def __init__(self, process: subprocess.Popen[str], ready_line: str) -> None:
        self.process = process
        self.ready_line = ready_line
        self.output: list[str] = []

    @property
    def url(self) -> str:
        return self.ready_line.split()[-1].removeprefix("endpoint=")

    def kill9(self) -> None:
        self.process.kill()
        self.process.wait()

    def terminate(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(STOP_TIMEOUT)


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(field) for field in text.split()]


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers signal 0; it is gone as far as anyone can reach it.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def child_env(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env.update({"PYTHONUNBUFFERED": "1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                "AWS_DEFAULT_REGION": "us-east-1"})
    # A stand-in started with this environment accepts the same pair the clients sign with.
    env.update(KeyPair("test", "test").environment())
    env.update(overrides)
    return env


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


@contextmanager
def running(argv: Sequence[str], ready_prefix: str, env: Mapping[str, str] | None = None,
            new_session: bool = False, stderr: IO[str] | None = None) -> Iterator[Started]:
    """Start ``argv``, wait for a stdout line starting with ``ready_prefix``, and stop it on exit.

    With ``new_session`` the process leads its own process group, and the whole group is killed at the end.
    """
    process = subprocess.Popen(list(argv), env=dict(env or child_env()), stdout=subprocess.PIPE, stderr=stderr,
                               stdin=subprocess.DEVNULL, text=True, start_new_session=new_session)
    lines: queue.Queue[str | None] = queue.Queue()

    started: Started | None = None

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if started is not None:
                started.output.append(line)
            else:
                lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        seen: list[str] = []
        while True:
            line = lines.get(timeout=READY_TIMEOUT)
            if line is None:
                raise RuntimeError(f"{argv} exited with {process.wait()} before it was ready: {''.join(seen)}")
            if line.startswith(ready_prefix):
                break
            seen.append(line)
        started = Started(process, line.strip())
        started.output.extend(seen)
        yield started
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if new_session:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
