"""Checkpoints taken while a partition serves, so that a start after a crash replays only the log since the last.

A clean stop and each compaction write a checkpoint (``ferrymq.storage.log.checkpoint``), but a partition whose log
is not worth compacting (a large backlog nobody consumes) would replay everything since its last clean stop after a
crash.  So every ``checkpoint_bytes`` of log appended, the replica writes its state as of its last applied record:
as a delta of the checkpoint in place, holding only the chunks of the state's arrays that changed, or as a new base
(``ferrymq.storage.log.checkpoint_chain``).

A delta hashes the whole state to find what changed (about 0.3 s of CPU at ten million messages, 1 GB of arrays;
0.8 s with the digests of the chain's second version), so the interval stretches with what the last checkpoint
cost, up to ``checkpoint_max_bytes``: a small backlog is checkpointed often and replays little after a crash, a
large one pays no more per message than :data:`LOG_BYTES_PER_CHECKPOINT_CPU_SECOND` allows.

Bytes of log are a poor measure of what a replay costs when the records are small: a consumer draining a backlog
writes 14 bytes of log per message received and deleted (a record of 72 bytes per batch of ten), which replay at
about 40 µs a record, so 32 MiB of them would take 17 s to replay and 128 MiB over a minute.  So a checkpoint is
also due every ``checkpoint_records`` records, stretched as the last checkpoint cost more, until replaying the
records since would take about what that checkpoint took (:data:`REPLAY_SECONDS_PER_RECORD`): a start after a
crash then replays for about as long as one checkpoint takes, whatever the records.

Both measures bound what checkpoints cost per message, not per second.  A follower catching up applies log at
100 MB/s, 20,000 records a second: at ten million messages it took a checkpoint every half second, 0.15-0.5 s of
CPU each, and with two cores shared by three workers the loops waited for a CPU for up to 262 ms.  So a checkpoint
also waits until the last one's CPU is :data:`CPU_SHARE` of the time since it started; records that arrive
meanwhile, or while a checkpoint is being written, are looked at again once it may be taken
(:meth:`CheckpointFork.retry_in`), not only at the next commit, which after a catch-up or a burst may be long in
coming.

Pickling the state takes about 0.25 s per million messages: too long to hold the event loop, and the state changes
with every request, so it cannot be pickled in a thread either.  The worker forks instead.  The child holds a
copy-on-write view of the state as of that instant, writes it to a temporary file, syncs it and exits; the parent
waits for the exit in a thread, then puts the file in place under the log's segment lock, unless the log was cut or
compacted meanwhile (the checkpoint names the segments as they were).  The fork holds the loop only while the
kernel copies the page tables: about 15 ms for a worker holding 300,000 messages, 16-25 ms per GB of memory mapped
with 4 KiB pages, under 1 ms with huge pages, which a slow fork has the worker ask for (:mod:`.huge_pages`).

Records appended but not yet durable at that instant are part of the state.  The checkpoint lists them (offset and
the messages they added); recovery places those messages as it walks past the records, and a log that does not
hold them all (a crash lost them before they were synced) makes the checkpoint unusable, so the whole log is
replayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ferrymq.storage.log.checkpoint import (
    Checkpoint,
    CheckpointUnusable,
    fill_crcs,
    publish_checkpoint,
    segments_unchanged,
    write_checkpoint,
)
from ferrymq.storage.log.writer import LogWriter

log = logging.getLogger(__name__)

RUNNING_TMP = "state.ckpt.running"
"""The start of the name of the file a child writes (``.<its pid>`` follows), put in place as the checkpoint once
it checks out.  Any left by a worker killed meanwhile are deleted when its partition next opens."""
_PR_SET_PDEATHSIG = 1
LOG_BYTES_PER_CHECKPOINT_CPU_SECOND = 256 * 1024 * 1024
"""Checkpoints taken while serving cost at most a second of CPU per this much log (4 ms per MiB: about 2 µs for a
message of 256 B), unless ``checkpoint_max_bytes`` would be passed: the log bytes a checkpoint must wait for at
least, per second of CPU the last one took."""


REPLAY_SECONDS_PER_RECORD = 40e-6
"""What replaying a record costs, about (measured: a drain's records, each a receive or a delete of ten messages,
37-39 µs; a send of ten about 31 µs): the records a checkpoint waits for, per second of CPU the last one took, are
about what it would take that long to replay."""


CPU_SHARE = 0.2
"""Checkpoints taken while serving keep to this share of a core, over time: the next waits until the last one's CPU
is this share of the time since it started."""


def running_tmp(pid: int) -> str:
    return f"{RUNNING_TMP}.{pid}"


def discard_leftovers(directory: Path) -> None:
    """Delete the files of checkpoints whose worker died before putting them in place."""
    for leftover in directory.glob(f"{RUNNING_TMP}.*"):
        with contextlib.suppress(OSError):
            leftover.unlink()


class CheckpointFork:
    """Takes one partition's checkpoints while it serves, one at a time (module docstring)."""

    def __init__(self, partition: int, directory: Path, every_bytes: int, most_bytes: int = 0,
                 on_forked: Callable[[float], None] | None = None, every_records: int = 0,
                 on_may_take: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``on_forked`` is told how long each fork held the loop (seconds), once its child has exited: the
        worker's huge pages (:mod:`.huge_pages`).  ``on_may_take`` is called once a checkpoint ends, and once
        the wait for :data:`CPU_SHARE` ends: whether one is due is to be asked again."""
        self.partition = partition
        self.directory = directory
        self.every_bytes = every_bytes
        """Log bytes appended between checkpoints, at least; 0: none taken while serving."""
        self.most_bytes = most_bytes
        """How far the interval stretches with what the last checkpoint cost (:meth:`interval`); at most
        ``every_bytes``: it does not."""
        self.every_records = every_records
        """Records appended between checkpoints, at least, whatever their bytes (:meth:`record_interval`); 0:
        only bytes count."""
        self.last_cpu = 0.0
        """The CPU seconds the last checkpoint's child spent."""
        self.taken = 0
        """Checkpoints put in place."""
        self.dropped = 0
        """Checkpoints written but not put in place: the log was cut or compacted meanwhile, or the child failed."""
        self.last_size = 0
        """The bytes the next delta is expected to write at least: the size of the last delta put in place, or
        after a base, what of it every delta repeats (its head, pickled state and table)."""
        self._since: tuple[LogWriter, int, int] | None = None
        """The log, and its position (bytes, then records) at the last checkpoint (or when it was opened)."""
        self._child: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._on_forked = on_forked
        self._on_may_take = on_may_take
        self._clock = clock
        self._started = -float("inf")
        """When the last checkpoint was forked (``clock``)."""
        self._retry: asyncio.TimerHandle | None = None

    def due(self, wal: LogWriter) -> bool:
        """Whether enough was appended to ``wal`` since the last checkpoint (:meth:`interval`,
        :meth:`record_interval`), none is being written, and the last one's CPU is within :data:`CPU_SHARE` of the
        time since it started.  Enough appended but too soon: ``on_may_take`` is called once it is not."""
        if self.every_bytes <= 0 or self._task is not None:
            return False
        since = self._since
        if since is None or since[0] is not wal:
            self._since = (wal, wal.end, wal.end_offset)
            return False
        enough = wal.end - since[1] >= self.interval() or (
            self.every_records > 0 and wal.end_offset - since[2] >= self.record_interval())
        if not enough:
            return False
        wait = self.retry_in()
        if wait <= 0:
            return True
        if self._retry is None and self._on_may_take is not None:
            self._retry = asyncio.get_running_loop().call_later(wait, self._may_take)
        return False

    def retry_in(self) -> float:
        """Seconds until the last checkpoint's CPU is :data:`CPU_SHARE` of the time since it started (0: it is)."""
        return max(0.0, self._started + self.last_cpu / CPU_SHARE - self._clock())

    def _may_take(self) -> None:
        self._retry = None
        if self._on_may_take is not None:
            self._on_may_take()

    def record_interval(self) -> int:
        """The records the next checkpoint waits for, if their bytes have not made it due first:
        ``every_records`` at least, and as many as would take about as long to replay as the last checkpoint
        took (:data:`REPLAY_SECONDS_PER_RECORD`), so that checkpoints cost no more CPU than the replays they
        spare."""
        return max(self.every_records, round(self.last_cpu / REPLAY_SECONDS_PER_RECORD))

    def interval(self) -> int:
        """The log bytes the next checkpoint waits for: ``every_bytes`` at least, and at least :attr:`last_size`,
        so that deltas write about as much as the log does at most.  A base (about 1 GB at ten million messages)
        is written only once the deltas since the last would hold half of it, so bases write at most about twice
        what deltas do (:mod:`~ferrymq.storage.log.checkpoint_chain`).  Up to ``most_bytes``, enough that the
        last checkpoint's CPU stays within :data:`LOG_BYTES_PER_CHECKPOINT_CPU_SECOND`."""
        by_cost = min(self.most_bytes, int(self.last_cpu * LOG_BYTES_PER_CHECKPOINT_CPU_SECOND))
        return max(self.every_bytes, self.last_size, by_cost)

    def take(self, wal: LogWriter, checkpoint: Checkpoint) -> None:
        """Have a child process write ``checkpoint``, the live state as of this instant (module docstring)."""
        self._since = (wal, wal.end, wal.end_offset)
        self._started = self._clock()
        rewrites = wal.rewrites
        parent = os.getpid()
        forking = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            _write_and_exit(self.directory, checkpoint, parent)
        # The loop's only wait for the checkpoint: the fork copies the worker's page tables.
        forked = time.perf_counter() - forking
        self._child = pid
        self._task = asyncio.get_running_loop().create_task(
            self._finish(wal, pid, rewrites, checkpoint.offset, checkpoint.segments, forked)
        )

    async def _finish(
        self, wal: LogWriter, pid: int, rewrites: int, offset: int, segments: list[tuple[int, int, int]],
        forked: float,
    ) -> None:
        tmp_name = running_tmp(pid)
        tmp = self.directory / tmp_name
        try:
            _, status, usage = await asyncio.to_thread(os.wait4, pid, 0)
            self._child = None
            self.last_cpu = usage.ru_utime + usage.ru_stime
            if self._on_forked is not None:
                # Once the child is gone: until then the pages are shared with it.
                self._on_forked(forked)
            code = os.waitstatus_to_exitcode(status)
            if code != 0:
                self.dropped += 1
                log.warning("partition %d: the checkpoint as of offset %d was not written (exit status %d)",
                            self.partition, offset, code)
                return
            async with wal.segment_lock:
                if wal.closed or wal.rewrites != rewrites or not segments_unchanged(self.directory, segments):
                    self.dropped += 1
                    log.info("partition %d: the checkpoint as of offset %d is dropped: the log was cut or compacted "
                             "while it was written", self.partition, offset)
                    return
                placed = await asyncio.to_thread(publish_checkpoint, self.directory, tmp_name)
            self.taken += 1
            self.last_size = placed.size if placed.position else placed.chunks_at
            log.info("partition %d: checkpoint as of offset %d written while serving (%s, %d bytes, %.2f s of CPU, "
                     "the next after %d bytes of log%s, and %.1f s after this one's start; the fork held the loop "
                     "%.1f ms)", self.partition, offset,
                     f"delta {placed.position}" if placed.position else "a new base", placed.size, self.last_cpu,
                     self.interval(), f" or {self.record_interval()} records" if self.every_records > 0 else "",
                     self.last_cpu / CPU_SHARE, forked * 1000)
        except (OSError, CheckpointUnusable) as exc:
            self.dropped += 1
            log.warning("partition %d: the checkpoint as of offset %d was not put in place (%s)", self.partition,
                        offset, exc)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            self._task = None
            if self._on_may_take is not None:
                # Records appended while this one was written are not to wait for the next commit.
                self._on_may_take()

    async def close(self) -> None:
        """Stop a checkpoint being written (the stop writes its own, or the next start replays more)."""
        self._on_may_take = None
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._child, signal.SIGKILL)
        task = self._task
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)


def _write_and_exit(directory: Path, checkpoint: Checkpoint, parent: int) -> NoReturn:
    """In the child: write the checkpoint and leave at once, running nothing of the parent's (no cleanup, no
    handlers: the loop, its sockets and its threads are the parent's)."""
    code = 1
    try:
        # A signal for the child must not wake the parent's loop through the descriptor they share.
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(-1)
            for number in (signal.SIGTERM, signal.SIGINT):
                signal.signal(number, signal.SIG_DFL)
        # A worker killed meanwhile takes its child along: nobody would put the file in place.
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == parent:
            fill_crcs(directory, checkpoint)
            write_checkpoint(directory, checkpoint, tmp_name=running_tmp(os.getpid()), publish=False)
            code = 0
    finally:
        os._exit(code)
