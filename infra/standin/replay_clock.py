"""moto's clock, pinned to a journaled time while a journal record is replayed.

moto stamps what it creates (S3 objects' LastModified, for instance) with ``moto.core.utils.utcnow``, which
its modules import by name. :func:`install` swaps every such reference for :meth:`ReplayClock.utcnow`, which
returns the pinned time while replay runs and the real time otherwise, so replayed objects keep the
timestamps their clients saw.
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class ReplayClock:
    def __init__(self, real_utcnow: Callable[[], datetime.datetime]) -> None:
        self._real_utcnow = real_utcnow
        self._pinned: datetime.datetime | None = None

    def utcnow(self) -> datetime.datetime:
        pinned = self._pinned
        return pinned if pinned is not None else self._real_utcnow()

    @contextmanager
    def pinned_at(self, unix_seconds: float) -> Iterator[None]:
        """moto's naive-UTC "now" reads ``unix_seconds`` inside the block. Not for use while serving."""
        self._pinned = datetime.datetime.fromtimestamp(unix_seconds, datetime.UTC).replace(tzinfo=None)
        try:
            yield
        finally:
            self._pinned = None


def install() -> ReplayClock:
    """Route every loaded moto module's ``utcnow`` through a new :class:`ReplayClock`.

    Modules imported later pick up the replacement from ``moto.core.utils`` themselves.
    """
    import moto.core.utils as moto_utils

    original = moto_utils.utcnow
    clock = ReplayClock(original)
    for name, module in list(sys.modules.items()):
        if (name == "moto" or name.startswith("moto.")) and getattr(module, "utcnow", None) is original:
            module.utcnow = clock.utcnow  # type: ignore[attr-defined]
    return clock
