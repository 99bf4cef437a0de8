"""Where a worker keeps its partitions' logs, and the move from the single-partition layout.

A worker's data directory holds one log directory per partition it serves::

    <data dir>/
        LOCK                  the worker's lock (ferrymq.storage.log.lock)
        p0/                   partition 0: LOCK, 00000000000000000001.seg, ...
        p7/                   partition 7: ...

Workers that served a single partition kept its segments directly in the data directory.  Such a directory
is adopted at start: each segment file (and a compaction's leftover ``.seg.tmp``) is renamed into the
partition's directory, lowest first, and both directories are fsynced.  A rename moves a file whole, so a
crash midway leaves every file in exactly one of the two places, and the next start moves the rest: no
record is lost or doubled, and recovery only reads the partition's directory once the move is complete.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ferrymq.storage.log.segments import SUFFIX, TMP_SUFFIX, fsync_dir

log = logging.getLogger(__name__)


def replica_dir(data_dir: Path, partition: int) -> Path:
    """The log directory of ``partition`` inside a worker's data directory."""
    return data_dir / f"p{partition}"


def legacy_segments(directory: Path) -> list[str]:
    """The names of the segment files (and compaction leftovers) lying directly in ``directory``."""
    if not directory.is_dir():
        return []
    names = [
        entry.name
        for entry in os.scandir(directory)
        if entry.is_file() and _is_log_file(entry.name)
    ]
    return sorted(names)


def adopt_legacy_log(source: Path, target: Path) -> int:
    """Move the segment files lying directly in ``source`` into ``target`` (made if missing), one rename
    each; returns how many were moved.  Safe to run again after a crash midway (see the module docstring)."""
    names = legacy_segments(source)
    if not names:
        return 0
    target.mkdir(parents=True, exist_ok=True)
    fsync_dir(target.parent)
    for name in names:
        if (target / name).exists():
            raise FileExistsError(f"cannot move {source / name} into {target}: {name} is there already")
        os.rename(source / name, target / name)
    fsync_dir(target)
    fsync_dir(source)
    log.info("moved %d log files of the single-partition layout from %s into %s", len(names), source, target)
    return len(names)


def _is_log_file(name: str) -> bool:
    return any(name.endswith(suffix) and name[: -len(suffix)].isdigit() for suffix in (SUFFIX, TMP_SUFFIX))
