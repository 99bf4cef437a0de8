"""Child processes of the local stack: start one, wait for its ready line, forward its output, stop it.

Every FerryMQ process announces readiness with one line on stdout (``FERRYMQ_STANDIN_READY ...``,
``FERRYMQ_WORKER_READY ...``, ``FERRYMQ_GATEWAY_READY ...``). A reader thread per child watches for that
line and then keeps forwarding the child's stdout, prefixed with its name, so a chatty child never blocks on
a full pipe. stderr is inherited: logs go where the parent's go; a caller that wants to read them as they pass
(``stderr_lines``) gets them through a pipe, and they are still written to this process's stderr unchanged.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

DEFAULT_READY_TIMEOUT = 60.0
DEFAULT_STOP_TIMEOUT = 10.0


class ChildFailed(RuntimeError):
    """A child exited, or never became ready."""


class Child:
    """A started child process whose ready line has been seen."""

    def __init__(self, name: str, process: subprocess.Popen[str], ready_fields: list[str]) -> None:
        self.name = name
        self.process = process
        self.ready_fields = ready_fields
        self.stderr_reader: threading.Thread | None = None
        """The thread passing on its stderr, when the caller reads it (``launch_child(stderr_lines=...)``)."""

    def stderr_read(self, timeout: float = 1.0) -> None:
        """Once the child has exited: wait (briefly) until its last stderr lines have been read."""
        if self.stderr_reader is not None:
            self.stderr_reader.join(timeout)

    @property
    def pid(self) -> int:
        return self.process.pid

    def exit_status(self) -> int | None:
        """None while running, else the exit status (negative: killed by that signal)."""
        return self.process.poll()

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT) -> int:
        """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


def _pump(process: subprocess.Popen[str], name: str, ready_prefix: str, ready: queue.Queue[str | None],
          out: TextIO) -> None:
    assert process.stdout is not None
    announced = False
    for line in process.stdout:
        if not announced and line.startswith(ready_prefix):
            announced = True
            ready.put(line.strip())
            continue
        out.write(f"[{name}] {line}")
        out.flush()
    if not announced:
        ready.put(None)


def _pump_stderr(process: subprocess.Popen[str], seen: Callable[[str], None], out: TextIO) -> None:
    assert process.stderr is not None
    for line in process.stderr:
        out.write(line)
        out.flush()
        seen(line)


class Starting:
    """A launched child whose ready line is still awaited; several can start at once and be awaited in turn."""

    def __init__(self, child: Child, ready: queue.Queue[str | None]) -> None:
        self.child = child
        self._ready = ready
        self._waiting_since = time.monotonic()

    def progressed(self) -> None:
        """The child said it is getting on (a large log being recovered): :meth:`poll`'s time starts again."""
        self._waiting_since = time.monotonic()

    def poll(self, timeout: float = DEFAULT_READY_TIMEOUT) -> Child | None:
        """The child once its ready line has arrived, None while it is still starting; raises
        :class:`ChildFailed` (after stopping the child) if it exited first or ``timeout`` seconds passed since
        its launch or its last :meth:`progressed`. Never waits."""
        child = self.child
        try:
            line = self._ready.get_nowait()
        except queue.Empty:
            if time.monotonic() - self._waiting_since > timeout:
                child.stop()
                raise ChildFailed(f"{child.name} was not ready within {timeout:.0f} s, nor said it got on") from None
            return None
        if line is None:
            status = child.process.wait()
            raise ChildFailed(f"{child.name} exited with {signal_name(status)} before it was ready")
        child.ready_fields = line.split()[1:]
        return child

    def wait_ready(self, *, timeout: float = DEFAULT_READY_TIMEOUT,
                   should_abort: Callable[[], bool] = lambda: False) -> Child:
        """Return the child once its ready line arrives. Raises :class:`ChildFailed` (after stopping the child)
        if it exits first, ``timeout`` passes, or ``should_abort()`` turns true meanwhile."""
        child = self.child
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._ready.get(timeout=0.05)
            except queue.Empty:
                line = ""
            if line is None:
                status = child.process.wait()
                raise ChildFailed(f"{child.name} exited with {signal_name(status)} before it was ready")
            if line:
                child.ready_fields = line.split()[1:]
                return child
            if should_abort():
                child.stop()
                raise ChildFailed(f"{child.name}: start-up interrupted")
            if time.monotonic() > deadline:
                child.stop()
                raise ChildFailed(f"{child.name} was not ready within {timeout:.0f} s")


def launch_child(name: str, argv: Sequence[str], env: Mapping[str, str], ready_prefix: str, *,
                 out: TextIO | None = None, stderr_lines: Callable[[str], None] | None = None,
                 pass_fds: Sequence[int] = ()) -> Starting:
    """Start ``argv`` without waiting: its ready line (a line starting with ``ready_prefix``) is awaited by
    :meth:`Starting.wait_ready` or :meth:`Starting.poll`. ``stderr_lines`` is called with each line the child
    writes to stderr, after it is passed on to this process's stderr. ``pass_fds``: descriptors the child
    inherits, under the same numbers."""
    process = subprocess.Popen(
        list(argv),
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stderr_lines is not None else None,
        text=True,
        bufsize=1,
        pass_fds=tuple(pass_fds),
    )
    child = Child(name, process, [])
    if stderr_lines is not None:
        child.stderr_reader = threading.Thread(target=_pump_stderr, args=(process, stderr_lines, sys.stderr),
                                               name=f"{name}-stderr", daemon=True)
        child.stderr_reader.start()
    ready: queue.Queue[str | None] = queue.Queue()
    threading.Thread(
        target=_pump, args=(process, name, ready_prefix, ready, out or sys.stdout), name=f"{name}-stdout",
        daemon=True,
    ).start()
    return Starting(child, ready)


def python_module_argv(module: str, *args: str) -> list[str]:
    """Run ``module`` with this interpreter, so children use the same virtualenv."""
    return [sys.executable, "-m", module, *args]


def child_environment(base: Mapping[str, str], **overrides: str) -> dict[str, str]:
    env = dict(base)
    env.update(overrides)
    # Ready lines must arrive as soon as they are printed.
    env["PYTHONUNBUFFERED"] = "1"
    return env


def stop_all(children: Sequence[Child], timeout: float = DEFAULT_STOP_TIMEOUT) -> None:
    """Stop ``children`` one by one, last started first."""
    for child in reversed(children):
        child.stop(timeout)


def signal_name(status: int) -> str:
    if status < 0:
        try:
            return f"signal {signal.Signals(-status).name}"
        except ValueError:
            return f"signal {-status}"
    return f"status {status}"
