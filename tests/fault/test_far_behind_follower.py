"""A follower left behind by compaction, in a real ``ferrymq up`` (three workers, RF 3) whose logs roll every
64 KiB and are compacted as soon as they are worth it.

Under send + receive + delete load, a follower is stopped (SIGSTOP) until its leader has compacted away the
records after the follower's log end, then killed; ``up`` restarts it on its old log.  The records it lacks
exist only inside the leader's base, so it copies the leader's first segment as bytes (COPY_BASE), installs
it and fetches the rest, while the load goes on.  Checked like the other scenarios: nothing acknowledged is
lost, nothing unexpected or deleted comes out, FIFO groups keep their order; and the copy is named in the log.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ferrymq.storage.log.format import RECORD, decode_header
from ferrymq.storage.log.reading import read_head
from ferrymq.storage.log.segments import list_segments, segment_path
from tests.e2e.conftest import Stack
from tests.fault.conftest import fault_stack
from tests.fault.test_failover import run_scenario, wait_healthy, worker_pids
from tests.support.log_files import frames_of
from tests.support.processes import stop_process

COMPACTING = {
    "FERRYMQ_WORKER_SEGMENT_BYTES": str(64 * 1024),
    "FERRYMQ_WORKER_COMPACT_MIN_BYTES": str(128 * 1024),
}
COPY_LOGGED = "installing a copy of leader"


@pytest.fixture(scope="module")
def compacting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from fault_stack(tmp_path_factory, "compacting-stack", **COMPACTING)


def log_end(directory: Path) -> int:
    """The offset after the last record in the log in ``directory`` (of a stopped worker: read, never changed)."""
    for index in reversed(list_segments(directory)):
        offsets = [f.offset for f in frames_of(segment_path(directory, index)) if f.flags == RECORD]
        if offsets:
            return max(offsets) + 1
    return 1


def log_start(directory: Path) -> int:
    """The first offset the log in ``directory`` still holds (its first segment's, as its header says).  The
    log is live: compaction may remove the first segment between listing and reading it, so list again."""
    while True:
        try:
            return decode_header(read_head(segment_path(directory, list_segments(directory)[0]))).first_offset
        except FileNotFoundError:
            continue


def test_a_follower_compacted_past_rejoins_by_copying_the_leader_s_base_under_load(compacting: Stack) -> None:
    part = wait_healthy(compacting)["partitions"][0]
    leader = part["leader"]
    victim = next(r for r in part["replicas"] if r != leader)
    workers = compacting.data_dir / "workers"
    copies_before = compacting.log_path.read_text().count(COPY_LOGGED)

    def leave_behind() -> None:
        pid = worker_pids(compacting)[victim]
        stop_process(pid)
        end = log_end(workers / victim / "p0")
        deadline = time.monotonic() + 30
        while log_start(workers / leader / "p0") <= end:
            assert time.monotonic() < deadline, "the leader did not compact past the stopped follower"
            time.sleep(0.2)
        os.kill(pid, signal.SIGKILL)

    run_scenario(compacting, leave_behind)
    wait_healthy(compacting)
    assert compacting.log_path.read_text().count(COPY_LOGGED) > copies_before
