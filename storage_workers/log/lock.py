"""The lock a log directory's user holds: ``DIR/LOCK``, under ``flock``.

A storage worker holds it exclusively for as long as it runs; an offline tool takes it too (exclusively to
change the log, shared to only read it), so the two never work on the same files at once.  ``flock`` locks
go with the process, so a crashed holder never leaves the directory locked.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = "LOCK"


class DirectoryInUse(Exception):
    """Another process (a running storage worker, most likely) holds the log directory's lock."""


@contextmanager
def locked(directory: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold ``directory``'s lock for the ``with`` block; raises DirectoryInUse at once when it is taken."""
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DirectoryInUse(f"{directory} is in use (is a storage worker running on it?)") from None
        yield
    finally:
        os.close(fd)
