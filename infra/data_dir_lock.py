"""One ``ferrymq up`` per data directory: ``<data dir>/up.lock``, held with ``flock`` while ``up`` runs.

A second ``up`` on the same directory is refused before it touches anything, naming the one that runs (the
pid is written into the file once the lock is held). ``flock`` goes with the process: an ``up`` that was
killed leaves the directory free, and its children do not inherit the descriptor (``Popen`` closes it).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ferrymq.private_files import FILE_MODE

LOCK_FILE = "up.lock"


class DataDirInUse(RuntimeError):
    """Another live ``ferrymq up`` holds the data directory."""


class DataDirLock:
    """The held lock; :meth:`release` (or the process's exit) frees it."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, data_dir: Path) -> DataDirLock:
        """Take ``data_dir``'s lock at once, or raise :class:`DataDirInUse` saying who holds it."""
        path = data_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise DataDirInUse(
                f"another ferrymq up{holder} is running on {data_dir}: stop it first, or give this one another "
                "FERRYMQ_DATA_DIR"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _holder(fd: int) -> str:
    """`` (pid N)`` from the holder's file, or nothing when it has not written it yet."""
    text = os.pread(fd, 32, 0).decode(errors="replace").strip()
    return f" (pid {text})" if text.isdigit() else ""
