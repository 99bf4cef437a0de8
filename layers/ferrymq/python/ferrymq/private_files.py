"""Files only their owner may read: FerryMQ's data directories are 0700 and every file in them 0600.

Each FerryMQ process calls :func:`restrict_umask` first thing, so whatever it creates later (segments, journal,
snapshots, spool files, logs) gets owner-only modes even where the code opening it names a wider mode.
:func:`tighten_tree` brings the files of data directories written by earlier versions, or by processes
without that umask, down to the same modes.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077
DIR_MODE = 0o700
FILE_MODE = 0o600


def restrict_umask() -> int:
    """Make every file and directory this process creates from now on private; returns the previous umask."""
    return os.umask(PRIVATE_UMASK)


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) if needed and make it 0700; returns it."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    os.chmod(path, DIR_MODE)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically and durably with ``data``, mode 0600 from the moment the file exists: the
    data is fsynced before the rename, and the directory after it, so a crash leaves the old file or the new."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def tighten_tree(root: Path) -> int:
    """Make ``root`` and every directory under it 0700 and every file 0600; returns how many modes changed.

    Symbolic links are left alone (chmod would follow them out of the tree); entries that vanish meanwhile
    (a segment compacted away) are skipped."""
    changed = 0
    for directory, dirnames, filenames in os.walk(root):
        changed += _chmod(Path(directory), DIR_MODE)
        for name in filenames:
            changed += _chmod(Path(directory) / name, FILE_MODE)
        dirnames[:] = [d for d in dirnames if not (Path(directory) / d).is_symlink()]
    return changed


def _chmod(path: Path, mode: int) -> int:
    with contextlib.suppress(FileNotFoundError):
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode) or stat.S_IMODE(st.st_mode) == mode:
            return 0
        os.chmod(path, mode)
        return 1
    return 0
