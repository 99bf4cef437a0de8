"""``ferrymq up`` as a child process, for the end-to-end tests and the benchmarks that drive a whole stack.

``UpProcess`` starts ``ferrymq up`` in a session (process group) of its own, so one ``killpg`` reaches it and
every child it started. Its stderr and stdout both go to ``<data dir>/up.log``; a reader thread copies stdout
there line by line and watches for ``FERRYMQ_READY endpoint=URL``, and keeps copying after it so that a
chatty stack never blocks on a full pipe. ``up_environment`` is the environment such a stack wants: the
caller's, minus anything that would point it at AWS services elsewhere, on a free port and the given data
directory.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from ferrymq.infra.local_stack import READY_PREFIX
from ferrymq.infra.standin import layout
from ferrymq.private_files import FILE_MODE, private_dir

START_TIMEOUT_SECONDS = 120.0
STOP_TIMEOUT_SECONDS = 30.0
LOG_FILE = "up.log"
# Variables of the developer's shell that would point the stack somewhere else.
_FOREIGN_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL", "FERRYMQ_AWS_ENDPOINT_URL")


class UpNotReady(RuntimeError):
    """``ferrymq up`` exited, or did not print its ready line in time."""


def ferrymq_command() -> list[str]:
    """The ``ferrymq`` command of this interpreter's environment (the module when no script is installed)."""
    script = Path(sys.executable).with_name("ferrymq")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ferrymq.infra.cli"]


def up_environment(data_dir: Path) -> dict[str, str]:
    """This process's environment without endpoint overrides, with ``FERRYMQ_PORT=0`` and ``data_dir``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _FOREIGN_ENDPOINT_VARIABLES and not k.startswith("AWS_ENDPOINT_URL_")
    }
    env.update({"FERRYMQ_PORT": "0", "FERRYMQ_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"})
    return env


class UpProcess:
    """One ``ferrymq up`` on ``data_dir``; ``start`` may be called again after ``stop`` or ``kill9_all``."""

    def __init__(self, data_dir: Path, env: Mapping[str, str], *,
                 start_timeout: float = START_TIMEOUT_SECONDS, stop_timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        self.data_dir = data_dir
        self.env = dict(env)
        self.log_path = data_dir / LOG_FILE
        self.endpoint = ""
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._process: subprocess.Popen[str] | None = None

    @property
    def process(self) -> subprocess.Popen[str] | None:
        """The running ``ferrymq up``, or None before ``start`` and after a stop."""
        return self._process

    def start(self) -> None:
        """Start ``ferrymq up`` and return once it is ready; on failure nothing of it is left running."""
        private_dir(self.data_dir)
        # The log may hold secrets the stack prints (the development key): owner-only, like the rest of the dir.
        os.close(os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, FILE_MODE))
        with self.log_path.open("a") as log:
            self._process = subprocess.Popen(
                [*ferrymq_command(), "up"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                start_new_session=True,
            )
        self.endpoint = self._wait_for_ready(self._process)

    def _wait_for_ready(self, process: subprocess.Popen[str]) -> str:
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert process.stdout is not None
            with self.log_path.open("a") as log:
                for line in process.stdout:
                    log.write(line)
                    log.flush()
                    lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                continue
            if line is None:
                break
            if line.startswith(READY_PREFIX):
                return line.split("endpoint=", 1)[1].strip()
        self.kill9_all()
        raise UpNotReady(f"ferrymq up did not become ready; see {self.log_path}:\n{self.log_tail()}")

    def stop(self) -> int | None:
        """SIGTERM to ``up``, which stops its children in order; SIGKILL to the group if that hangs. Returns
        ``up``'s exit status: None when it had to be killed, or was not running."""
        process = self._process
        if process is None:
            return None
        status: int | None = process.poll()
        if status is None:
            process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                status = process.wait(self.stop_timeout)
        self.kill9_all()
        return status

    def kill9_all(self) -> None:
        """SIGKILL ``up`` and every child at once, as a power cut would; wait until the stand-in is gone."""
        process = self._process
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        self._process = None
        # The stand-in's lock is released only when its process is really gone; a restart needs it free.
        deadline = time.monotonic() + self.stop_timeout
        while layout.is_locked(self.data_dir / "aws") and time.monotonic() < deadline:
            time.sleep(0.05)

    def log_tail(self, lines: int = 60) -> str:
        """The last ``lines`` lines ``up`` wrote, for a failure message."""
        try:
            return "".join(self.log_path.read_text().splitlines(keepends=True)[-lines:])
        except OSError:
            return "(no log)"
