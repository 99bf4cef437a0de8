"""The stand-in's files in its data directory, and how other processes tell whether it is running.

``data_dir/``: ``snapshot.pickle`` (last snapshot), ``journal.log`` (records since), ``standin.lock``
(held with ``flock`` while a stand-in serves this directory), ``endpoint`` (written by ``ferrymq up``: the
URL the running stand-in listens on).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

READY_PREFIX = "FERRYMQ_STANDIN_READY"
SNAPSHOT_FILE = "snapshot.pickle"
JOURNAL_FILE = "journal.log"
LOCK_FILE = "standin.lock"
ENDPOINT_FILE = "endpoint"


def is_locked(data_dir: Path) -> bool:
    """Whether a live process holds ``data_dir``'s stand-in lock (the OS drops it when that process dies)."""
    path = data_dir / LOCK_FILE
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
