"""What the gateway processes serving one port tell each other: each one's request counters and recent errors.

Several gateways bound to one port (``SO_REUSEPORT``) each count the requests they answer, and a scrape of
``/metrics`` or a dashboard poll reaches one of them, whichever the kernel picks. So each writes what it counted
to a file of its own under ``directory`` every ``period`` seconds (or only touches the file when nothing was
counted since), and the one asked adds its own live counts to what its live siblings last wrote, as
prometheus_client's multiprocess mode does with its own files. One process of the port collects the queue
depths (asking every queue's workers once per period is enough for all of them): the others show the depths it
wrote. A sibling whose file has not been touched for ``STALE_PERIODS`` periods is gone: its counts leave the
sums, which a Prometheus counter reads as a restart of that process, as it would read a gateway's restart. A
process that stops removes its file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ferrymq.frontend.dashboard.errors import FailedRequest, RecentErrors
from ferrymq.frontend.metrics.depths import Depth, QueueDepths
from ferrymq.frontend.metrics.recorder import FrontendMetrics
from ferrymq.periodic import Periodic

log = logging.getLogger(__name__)

STALE_PERIODS = 3
"""A sibling's file untouched this many periods is a process gone."""
FORGOTTEN_SECONDS = 600.0
"""A file untouched this long is removed by whoever reads past it (its process died without removing it)."""
SUFFIX = ".counters"
_TMP_SUFFIX = ".tmp"


@dataclass(slots=True)
class Counts:
    """One process's counters as they stand, in plain lists: what one sibling's file holds."""

    latency: dict[tuple[str, str], tuple[list[int], float]] = field(default_factory=dict)
    """(action, code) -> (bucket counts, sum of seconds)."""
    throttled: dict[str, int] = field(default_factory=dict)
    queues: dict[tuple[str, str, str], tuple[list[int], list[int], float]] = field(default_factory=dict)
    """(account, region, name) -> ([sent, received, deleted, empty receives], size bucket counts, size sum)."""
    errors: list[FailedRequest] = field(default_factory=list)
    depths: dict[tuple[str, str, str], Depth] = field(default_factory=dict)
    """The queue depths the process collected (one process of a port does), as of ``depths_at``."""
    depths_at: float | None = None

    def add(self, other: Counts) -> None:
        """Add ``other``'s counts to these (errors are kept side by side; readers sort them); depths are not
        counts: the newer ones are kept."""
        for key, (counts, total) in other.latency.items():
            mine = self.latency.get(key)
            self.latency[key] = (counts, total) if mine is None else (_sum(mine[0], counts), mine[1] + total)
        for action, n in other.throttled.items():
            self.throttled[action] = self.throttled.get(action, 0) + n
        for key, (values, sizes, total) in other.queues.items():
            have = self.queues.get(key)
            self.queues[key] = ((values, sizes, total) if have is None
                                else (_sum(have[0], values), _sum(have[1], sizes), have[2] + total))
        self.errors.extend(other.errors)
        if other.depths_at is not None and (self.depths_at is None or other.depths_at > self.depths_at):
            self.depths, self.depths_at = other.depths, other.depths_at

    def encode(self) -> bytes:
        return orjson.dumps({
            "latency": [[*key, counts, total] for key, (counts, total) in self.latency.items()],
            "throttled": list(self.throttled.items()),
            "queues": [[*key, values, sizes, total] for key, (values, sizes, total) in self.queues.items()],
            "errors": [[e.at, e.account, e.action, e.code, e.message, e.request_id] for e in self.errors],
            "depths": [[*key, d.visible, d.in_flight, d.delayed, d.oldest_age_seconds]
                       for key, d in self.depths.items()],
            "depths_at": self.depths_at,
        })

    @classmethod
    def decode(cls, data: bytes) -> Counts:
        document = orjson.loads(data)
        return cls(
            latency={(action, code): (counts, total) for action, code, counts, total in document["latency"]},
            throttled={action: n for action, n in document["throttled"]},
            queues={(account, region, name): (values, sizes, total)
                    for account, region, name, values, sizes, total in document["queues"]},
            errors=[FailedRequest(*entry) for entry in document["errors"]],
            depths={(account, region, name): Depth(*figures)
                    for account, region, name, *figures in document["depths"]},
            depths_at=document["depths_at"],
        )


def counts_of(metrics: FrontendMetrics | None, errors: RecentErrors | None = None,
              depths: QueueDepths | None = None) -> Counts:
    """A copy of this process's counts as they stand (cheap: a list copy per histogram), and its depths."""
    counts = Counts(errors=errors.all() if errors is not None else [])
    if depths is not None and depths.refreshed_at is not None:
        counts.depths, counts.depths_at = dict(depths.figures), depths.refreshed_at
    if metrics is not None:
        counts.latency = {key: (list(h.counts), h.sum) for key, h in metrics.latency.items()}
        counts.throttled = dict(metrics.throttled)
        counts.queues = {key: ([c.sent, c.received, c.deleted, c.empty_receives], list(c.sizes.counts), c.sizes.sum)
                         for key, c in metrics.queues.items()}
    return counts


def newest_depths(others: Iterable[Counts], than: float | None = None) -> Counts | None:
    """Of ``others``, the one holding the newest queue depths (those the port's collector wrote), if any are
    newer than ``than``."""
    newest = max((c for c in others if c.depths_at is not None), key=lambda c: c.depths_at or 0.0, default=None)
    if newest is None or (than is not None and (newest.depths_at or 0.0) <= than):
        return None
    return newest


def _sum(a: list[int], b: list[int]) -> list[int]:
    if len(a) != len(b):
        # A sibling of another version with other buckets: its histogram cannot be added bucket by bucket.
        return a
    return [x + y for x, y in zip(a, b, strict=True)]


class Siblings:
    def __init__(self, directory: Path, counts: Callable[[], Counts], changed: Callable[[], Hashable], *,
                 period: float, wall: Callable[[], float] = time.time, me: str | None = None) -> None:
        """``counts`` takes this process's counts (on the event loop); ``changed`` is a value that moves whenever
        anything is counted (or the depths refreshed), so an idle process only touches its file."""
        self._directory = directory
        self._counts = counts
        self._changed = changed
        self.period = period
        self._wall = wall
        self._me = me or str(os.getpid())
        self._path = directory / f"{self._me}{SUFFIX}"
        self._written: Hashable = None
        self._periodic = Periodic("gateway siblings: writing this process's counts", period, self.publish)

    def publish(self) -> None:
        """Write this process's counts, or only touch its file when nothing was counted since the last write."""
        changed = self._changed()
        now = self._wall()
        if changed != self._written or not self._path.exists():
            self._directory.mkdir(parents=True, exist_ok=True)
            tmp = self._path.with_suffix(_TMP_SUFFIX)
            tmp.write_bytes(self._counts().encode())
            os.replace(tmp, self._path)
            self._written = changed
        # Stamped by the clock its readers compare with (the same as the file system's, but for tests).
        os.utime(self._path, (now, now))

    def others(self) -> list[Counts]:
        """What each live sibling last wrote (never this process's own file)."""
        found: list[Counts] = []
        now = self._wall()
        try:
            entries = list(os.scandir(self._directory))
        except FileNotFoundError:
            return found
        for entry in entries:
            if entry.name == self._path.name or not entry.name.endswith((SUFFIX, _TMP_SUFFIX)):
                continue
            try:
                age = now - entry.stat().st_mtime
                if age > FORGOTTEN_SECONDS:
                    # A process that died without removing its file, or halfway through writing it.
                    os.unlink(entry.path)
                    continue
                if entry.name.endswith(_TMP_SUFFIX) or age > STALE_PERIODS * self.period:
                    continue
                with open(entry.path, "rb") as f:
                    found.append(Counts.decode(f.read()))
            except FileNotFoundError:
                continue  # removed by its process's stop, or by another reader, meanwhile
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("gateway siblings: %s could not be read: %r", entry.name, exc)
        return found

    def start(self) -> None:
        self._periodic.start()

    async def close(self) -> None:
        await self._periodic.close()
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()
