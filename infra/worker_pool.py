"""The storage workers ``ferrymq up`` runs, supervised: one that fails to start or dies is started again, with
backoff, and never stops the others.

A restarted worker rejoins its cluster as its controller finds it: it follows each partition's current
leader, cuts what it holds beyond the leader's log, catches up and is taken back into the in-sync set (or,
as the item's leader whose lease is still live, claims the next epoch at once). The stack keeps serving
meanwhile from the other replicas. Backoff starts at ``MIN_BACKOFF_SECONDS`` and doubles up to
``MAX_BACKOFF_SECONDS`` while starts keep failing or the worker keeps dying within ``STABLE_SECONDS``.

Starts are never waited on: :meth:`WorkerPool.check`, called from ``up``'s loop, notices ready lines, failed
starts and deaths, and launches the workers whose backoff is over. Each failure is one line on stderr naming
the worker and its last error (the message of the last ERROR or CRITICAL log line it wrote, or the last line of
a traceback). ``up`` is ready once :meth:`WorkerPool.settled` (no worker still on its way up for the first time)
and :meth:`WorkerPool.quorum_ready` (a majority of each cluster's workers ready).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from ferrymq.infra.children import Child, ChildFailed, Starting, launch_child, signal_name

MIN_BACKOFF_SECONDS = 0.5
MAX_BACKOFF_SECONDS = 10.0
STABLE_SECONDS = 30.0
RESTART_READY_TIMEOUT = 60.0
"""How long a worker may take to say it is ready, counted again from each recovery progress line it writes (a
worker recovering a log of many gigabytes after a crash takes longer, and says so every few seconds)."""
RECOVERY_PROGRESS = "ferrymq.storage.log.recovery_progress"
"""The logger of a worker's recovery progress lines, in either log format."""
_ERROR_LEVELS = frozenset({"ERROR", "CRITICAL"})
# ferrymq.logs' text format: ``timestamp component LEVEL logger [request id]: message``.
_TEXT_LOG_LINE = re.compile(r"^\S+ \S+ (?P<level>[A-Z]+) \S+(?: \[[^\]]*\])?: (?P<message>.*)$")


def error_of(line: str) -> str | None:
    """What a worker's stderr ``line`` says went wrong, if it says so: an ERROR or CRITICAL log record's message
    (JSON or text format), or a line of Python's own (a traceback ends with the exception); None for the rest."""
    text = line.strip()
    if not text or line[:1].isspace():
        return None
    if text.startswith("{"):
        try:
            record = json.loads(text)
        except ValueError:
            return text
        if isinstance(record, dict) and "level" in record:
            return str(record.get("message", "")) if record["level"] in _ERROR_LEVELS else None
        return text
    matched = _TEXT_LOG_LINE.match(text)
    if matched:
        return matched["message"] if matched["level"] in _ERROR_LEVELS else None
    if text.startswith("Traceback ") or text.startswith("During handling of") or text.startswith("The above "):
        return None
    return text


@dataclass
class _Worker:
    worker_id: str
    argv: list[str]
    cluster: str
    ready_prefix: str = ""
    """Its own ready line's prefix, when not the pool's (the push hosts up runs beside the workers)."""
    env: Mapping[str, str] | None = None
    """Its own environment, when not the pool's (the gateway processes of one port)."""
    child: Child | None = None
    starting: Starting | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    backoff: float = MIN_BACKOFF_SECONDS
    restarts: int = field(default=0)
    failed_starts: int = 0
    last_error: str | None = None
    failure: str | None = None
    """Why its last start or run ended, until it is ready again."""

    @property
    def ready(self) -> bool:
        return self.child is not None and self.starting is None


class WorkerPool:
    def __init__(
        self,
        ready_prefix: str,
        env: Mapping[str, str] | None = None,
        *,
        should_abort: Callable[[], bool] = lambda: False,
        out: TextIO | None = None,
        err: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.env: dict[str, str] = dict(env or {})
        """The workers' environment (set once the AWS endpoint is known, before the first start)."""
        self._ready_prefix = ready_prefix
        self._should_abort = should_abort
        self._out = out
        self._err = err or sys.stderr
        self._clock = clock
        self._workers: dict[str, _Worker] = {}
        self.progressed_at = 0.0
        """When a starting worker last reported recovery progress (``time.monotonic()``)."""

    def launch(self, worker_id: str, argv: Sequence[str], cluster: str = "", ready_prefix: str = "") -> None:
        """Start a worker without waiting for it: :meth:`check` notices when it is ready, or failed (then it is
        started again after its backoff). The pool holds it from now on, so :meth:`stop` stops it. A worker of
        that id the pool runs already is stopped first (``up`` launched it with what it held at the last start,
        and the coordination tables say otherwise)."""
        current = self._workers.get(worker_id)
        if current is not None and current.child is not None:
            current.child.stop()
            current.child.stderr_read()
        worker = self._workers[worker_id] = _Worker(worker_id, list(argv), cluster, ready_prefix)
        self._launch(worker)

    def adopt(self, worker_id: str, child: Child, argv: Sequence[str], env: Mapping[str, str], cluster: str,
              ready_prefix: str) -> None:
        """Supervise a child started and found ready elsewhere as if the pool had launched it: should it die, it is
        started again with ``argv`` and ``env`` after its backoff."""
        self._workers[worker_id] = _Worker(worker_id, list(argv), cluster, ready_prefix, env, child=child,
                                           started_at=self._clock())

    def _launch(self, worker: _Worker) -> None:
        def seen(line: str) -> None:
            if RECOVERY_PROGRESS in line and worker.starting is not None:
                worker.starting.progressed()
                self.progressed_at = time.monotonic()
            error = error_of(line)
            if error:
                worker.last_error = error

        worker.last_error = None
        worker.starting = launch_child(worker.worker_id, worker.argv, worker.env or self.env,
                                       worker.ready_prefix or self._ready_prefix, out=self._out,
                                       stderr_lines=seen)
        worker.child = worker.starting.child
        worker.started_at = self._clock()
        worker.restart_at = None

    @property
    def children(self) -> list[Child]:
        return [w.child for w in self._workers.values() if w.child is not None]

    def restarts(self, worker_id: str) -> int:
        return self._workers[worker_id].restarts

    def quorum_ready(self) -> bool:
        """Whether a majority of each cluster's workers are ready: what a cluster needs to acknowledge writes
        (replication factor 3 of 3 workers, acks majority) and to keep the leases of its partitions."""
        clusters: dict[str, list[bool]] = {}
        for worker in self._workers.values():
            clusters.setdefault(worker.cluster, []).append(worker.ready)
        return all(sum(ready) > len(ready) // 2 for ready in clusters.values())

    def settled(self) -> bool:
        """Whether every worker is ready or has failed at least once (and waits for its next start): nothing is
        still on its way up for the first time."""
        return all(w.ready or w.failure is not None for w in self._workers.values())

    def failing(self) -> list[str]:
        """One line per worker that is not ready because its last start or run failed: its id and why."""
        return [f"{w.worker_id}: {w.failure}" for w in self._workers.values() if w.failure and not w.ready]

    def check(self) -> None:
        """Notice workers that became ready, failed to start or died, and start those whose backoff is over."""
        for worker in self._workers.values():
            if worker.starting is not None:
                self._check_start(worker)
            elif worker.child is not None:
                status = worker.child.exit_status()
                if status is not None:
                    now = self._clock()
                    if now - worker.started_at >= STABLE_SECONDS:
                        worker.backoff = MIN_BACKOFF_SECONDS
                    self._retry_later(worker, f"exited with {signal_name(status)}", worker.child.pid, "restarting it")
            elif worker.restart_at is not None and self._clock() >= worker.restart_at:
                worker.restarts += 1
                self._launch(worker)

    def _check_start(self, worker: _Worker) -> None:
        assert worker.starting is not None
        pid = worker.starting.child.pid
        try:
            child = worker.starting.poll(RESTART_READY_TIMEOUT)
        except ChildFailed as exc:
            if self._should_abort():
                return
            worker.failed_starts += 1
            reason = str(exc).removeprefix(f"{worker.worker_id} ").removesuffix(" before it was ready")
            self._retry_later(worker, f"failed to start: {reason}", pid, "next try")
            return
        if child is None:
            return
        worker.starting = None
        if worker.failure is not None:
            self._say(f"ferrymq: {worker.worker_id} is back (pid {child.pid})")
            worker.failure = None

    def _retry_later(self, worker: _Worker, what: str, pid: int, next_step: str) -> None:
        """Schedule the next start after the worker's backoff and say so in one line; doubles the backoff."""
        if worker.child is not None:
            worker.child.stderr_read()
        worker.failure = f"{what}{f' ({worker.last_error})' if worker.last_error else ''}"
        worker.child = None
        worker.starting = None
        worker.restart_at = self._clock() + worker.backoff
        self._say(f"ferrymq: {worker.worker_id} (pid {pid}) {worker.failure}; {next_step} in {worker.backoff:.1f} s")
        worker.backoff = min(worker.backoff * 2, MAX_BACKOFF_SECONDS)

    def _say(self, line: str) -> None:
        print(line, file=self._err, flush=True)

    def stop(self) -> None:
        """Stop every worker, last started first, and pass on the last lines each wrote to stderr."""
        for worker in reversed(list(self._workers.values())):
            if worker.child is not None:
                worker.child.stop()
                worker.child.stderr_read()
