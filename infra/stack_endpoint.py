"""Where a running ``ferrymq up`` serves: ``<data dir>/gateway.json``, so that admin commands find a stack that
picked a free port (``FERRYMQ_PORT=0``) the way they find its stand-in.

The file holds the gateway's URL and the pid of ``ferrymq up``. It is written once the gateway is ready and
removed when that ``up`` stops (by it alone); one left behind by an ``up`` that was killed names a pid that no
longer runs, and is ignored.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ferrymq.private_files import write_private
from ferrymq.settings import Settings

FILE_NAME = "gateway.json"


def path(settings: Settings) -> Path:
    return settings.data_dir / FILE_NAME


def record(settings: Settings, endpoint: str) -> None:
    write_private(path(settings), json.dumps({"endpoint": endpoint, "pid": os.getpid()}).encode())


def forget(settings: Settings) -> None:
    """Remove the file if this process wrote it: one naming another ``up`` is that one's to remove."""
    try:
        if int(json.loads(path(settings).read_text())["pid"]) != os.getpid():
            return
    except FileNotFoundError:
        return
    except (OSError, ValueError, KeyError, TypeError):
        pass  # unreadable: nobody can use it, whoever wrote it
    path(settings).unlink(missing_ok=True)


def running(settings: Settings) -> str | None:
    """The URL of the gateway a live ``ferrymq up`` on this data directory serves, if there is one."""
    try:
        document = json.loads(path(settings).read_text())
        endpoint, pid = str(document["endpoint"]), int(document["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, under another user
    return endpoint
