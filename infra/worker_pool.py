"""The storage workers ``ferrymq up`` runs, supervised: one that dies is started again, with backoff.

A restarted worker rejoins its cluster as its controller finds it: it follows each partition's current
leader, cuts what it holds beyond the leader's log, catches up and is taken back into the in-sync set (or,
as the item's leader whose lease is still live, claims the next epoch at once). The stack keeps serving
meanwhile from the other replicas. Backoff starts at ``MIN_BACKOFF_SECONDS`` and doubles up to
``MAX_BACKOFF_SECONDS`` while restarts keep failing or the worker keeps dying within ``STABLE_SECONDS``.
"""

from __future__ import annotations

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


@dataclass
class _Worker:
    worker_id: str
    argv: list[str]
    child: Child | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    backoff: float = MIN_BACKOFF_SECONDS
    restarts: int = field(default=0)


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

    def launch(self, worker_id: str, argv: Sequence[str]) -> Starting:
        """Start a worker without waiting for it to be ready: the caller awaits the returned start. The pool
        holds it from now on, so :meth:`stop` stops it even if it never becomes ready."""
        worker = self._workers[worker_id] = _Worker(worker_id, list(argv))
        return self._launch(worker)

    def _launch(self, worker: _Worker) -> Starting:
        starting = launch_child(worker.worker_id, worker.argv, self.env, self._ready_prefix, out=self._out)
        worker.child = starting.child
        worker.started_at = self._clock()
        worker.restart_at = None
        return starting

    def _start(self, worker: _Worker) -> Child:
        try:
            return self._launch(worker).wait_ready(timeout=RESTART_READY_TIMEOUT, should_abort=self._should_abort)
        except ChildFailed:
            # Stopped or dead already: check() must not count it as a second death.
            worker.child = None
            raise

    @property
    def children(self) -> list[Child]:
        return [w.child for w in self._workers.values() if w.child is not None]

    def restarts(self, worker_id: str) -> int:
        return self._workers[worker_id].restarts

    def check(self) -> None:
        """Notice workers that died and start those whose backoff is over."""
        now = self._clock()
        for worker in self._workers.values():
            child = worker.child
            if child is not None:
                status = child.exit_status()
                if status is None:
                    continue
                if now - worker.started_at >= STABLE_SECONDS:
                    worker.backoff = MIN_BACKOFF_SECONDS
                worker.child = None
                worker.restart_at = now + worker.backoff
                self._say(
                    f"ferrymq: {worker.worker_id} (pid {child.pid}) exited with {signal_name(status)}; "
                    f"restarting it in {worker.backoff:.1f} s"
                )
                worker.backoff = min(worker.backoff * 2, MAX_BACKOFF_SECONDS)
            elif worker.restart_at is not None and now >= worker.restart_at:
                worker.restarts += 1
                try:
                    self._start(worker)
                except ChildFailed as exc:
                    if self._should_abort():
                        return
                    worker.restart_at = self._clock() + worker.backoff
                    self._say(
                        f"ferrymq: restarting {worker.worker_id} failed ({exc}); next try in {worker.backoff:.1f} s"
                    )
                    worker.backoff = min(worker.backoff * 2, MAX_BACKOFF_SECONDS)
                else:
                    self._say(f"ferrymq: {worker.worker_id} is back (pid {worker.child.pid if worker.child else '?'})")

    def _say(self, line: str) -> None:
        print(line, file=self._err, flush=True)

    def stop(self) -> None:
        """Stop every worker, last started first."""
        for worker in reversed(list(self._workers.values())):
            if worker.child is not None:
                worker.child.stop()
