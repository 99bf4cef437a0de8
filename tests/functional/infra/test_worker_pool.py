"""The workers ``ferrymq up`` supervises, as small real processes: one that fails to start is started again after
a doubling backoff, with its last error in one line, and the stack's readiness is a majority of each cluster."""

from __future__ import annotations

import io
import sys

import pytest

from ferrymq.infra import local_stack
from ferrymq.infra.children import child_environment, launch_child
from ferrymq.infra.worker_pool import WorkerPool, error_of
from tests.support.waiting import wait_for

READY = "TEST_READY"
SERVES = [sys.executable, "-c", f"import time; print('{READY} here', flush=True); time.sleep(60)"]
FAILS = [sys.executable, "-c", "import sys; print('{\"level\":\"INFO\",\"message\":\"starting\"}', file=sys.stderr); "
         "print('{\"level\":\"ERROR\",\"message\":\"the log is damaged\"}', file=sys.stderr); sys.exit(3)"]


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _checked(pool: WorkerPool, condition: object) -> object:
    pool.check()
    return condition() if callable(condition) else condition


def test_a_worker_that_fails_to_start_is_retried_with_a_doubling_backoff_and_named_with_its_error() -> None:
    # given a cluster of three workers, one of which fails at every start
    clock, err = _Clock(), io.StringIO()
    pool = WorkerPool(READY, child_environment({}), err=err, clock=clock)
    try:
        pool.launch("w0", SERVES, "a")
        pool.launch("w1", FAILS, "a")
        pool.launch("w2", SERVES, "a")
        # then the cluster is ready on its majority, and the failing worker is named with its last error
        wait_for(lambda: _checked(pool, lambda: pool.quorum_ready() and pool.failing()))
        assert pool.failing() == ["w1: failed to start: exited with status 3 (the log is damaged)"]
        assert pool.settled()
        lines = err.getvalue().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ferrymq: w1 (pid ")
        assert lines[0].endswith(") failed to start: exited with status 3 (the log is damaged); next try in 0.5 s")
        # when its backoff is not over, then it is not started again
        pool.check()
        assert pool.restarts("w1") == 0
        # when it is over, then it is started again, and fails again with the next wait doubled
        for attempt, wait in ((1, "1.0"), (2, "2.0"), (3, "4.0")):
            clock.now += 10
            wait_for(lambda: _checked(pool, lambda: len(err.getvalue().splitlines()) == attempt + 1))  # noqa: B023
            assert pool.restarts("w1") == attempt
            assert err.getvalue().splitlines()[-1].endswith(f"; next try in {wait} s")
        assert pool.quorum_ready()
    finally:
        pool.stop()


def test_a_cluster_without_a_majority_of_ready_workers_is_not_ready() -> None:
    # given two clusters: one with two of three workers serving, the other with one of two
    pool = WorkerPool(READY, child_environment({}), err=io.StringIO())
    try:
        for worker_id, argv, cluster in (("a0", SERVES, "a"), ("a1", SERVES, "a"), ("a2", FAILS, "a"),
                                         ("b0", SERVES, "b"), ("b1", FAILS, "b")):
            pool.launch(worker_id, argv, cluster)
        wait_for(lambda: _checked(pool, lambda: len(pool.failing()) == 2))
        wait_for(lambda: _checked(pool, lambda: len(pool.children) == 3))
        # then the stack is not ready: cluster b has half of its workers, not a majority
        assert pool.settled()
        assert not pool.quorum_ready()
        # and a worker still on its way up for the first time keeps it unsettled
        pool.launch("b2", [sys.executable, "-c", "import time; time.sleep(60)"], "b")
        pool.check()
        assert not pool.settled()
    finally:
        pool.stop()


def test_up_gives_up_when_no_majority_is_ready_in_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a gateway that serves and a cluster whose only worker always fails to start
    monkeypatch.setattr(local_stack, "RESTART_READY_TIMEOUT", 3.0)
    pool = WorkerPool(READY, child_environment({}), err=io.StringIO())
    gateway = launch_child("gateway", SERVES, child_environment({}), READY, out=io.StringIO())
    try:
        pool.launch("w0", FAILS, "a")
        # when up awaits readiness, then it gives up in one line naming the worker and its error
        with pytest.raises(local_stack.StartupFailed) as failed:
            local_stack._await_ready(gateway, pool, local_stack._StopRequest())
        assert str(failed.value) == ("no majority of the storage workers was ready within 3 s: w0: failed to start: "
                                     "exited with status 3 (the log is damaged)")
    finally:
        pool.stop()
        gateway.child.stop()


@pytest.mark.parametrize(("line", "error"), [
    ('{"level":"ERROR","message":"storage worker could not start: x"}\n', "storage worker could not start: x"),
    ('{"level":"CRITICAL","message":"stopped after a log failure: y"}\n', "stopped after a log failure: y"),
    ('{"level":"WARNING","message":"slow"}\n', None),
    ("2026-11-26T03:00:00.000Z worker ERROR ferrymq.storage.x: could not start: z\n", "could not start: z"),
    ("2026-11-26T03:00:00.000Z worker INFO ferrymq.storage.server.process [r-1]: fine\n", None),
    ("Traceback (most recent call last):\n", None),
    ('  File "x.py", line 1, in <module>\n', None),
    ("ValueError: bad\n", "ValueError: bad"),
    ("\n", None),
    ("{not json\n", "{not json"),
])
def test_the_last_error_is_read_from_log_records_and_tracebacks(line: str, error: str | None) -> None:
    assert error_of(line) == error


def _starting_slowly(progress: bool) -> list[str]:
    """A worker ready after 3 s, writing a recovery progress line every 0.3 s meanwhile when ``progress``."""
    line = '{"level":"INFO","logger":"ferrymq.storage.log.recovery_progress","message":"recovering p0: 10%"}'
    say = f"print({line!r}, file=sys.stderr, flush=True); " if progress else ""
    return [sys.executable, "-c",
            f"import sys, time\nfor _ in range(10):\n    {say}time.sleep(0.3)\nprint('{READY} here', flush=True)\n"
            "time.sleep(60)"]


def test_a_worker_that_reports_recovery_progress_is_waited_for_past_the_start_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("ferrymq.infra.worker_pool.RESTART_READY_TIMEOUT", 1.5)
    pool = WorkerPool(READY, child_environment({}), err=io.StringIO())
    try:
        # given one worker that recovers for twice the timeout, saying so, and one as slow that says nothing
        pool.launch("recovering", _starting_slowly(progress=True), "a")
        pool.launch("silent", _starting_slowly(progress=False), "b")
        # then the silent one is given up on, and the one getting on is waited for until it is ready
        wait_for(lambda: _checked(pool, lambda: pool.failing()))
        assert [line.split(":")[0] for line in pool.failing()] == ["silent"]
        assert "was not ready within 2 s" in pool.failing()[0]
        wait_for(lambda: _checked(pool, lambda: any(c.name == "recovering" and c.ready_fields for c in pool.children)))
        assert pool.restarts("recovering") == 0
        # and the pool says when a worker last got on (what ferrymq up's own start deadline counts from)
        assert pool.progressed_at > 0
    finally:
        pool.stop()
