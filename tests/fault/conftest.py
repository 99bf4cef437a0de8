"""A replicated stack for fault injection: ``ferrymq up`` with three workers, replication factor 3 and
majority acks (the defaults), one partition, short leases so that failovers fit in a test, and a checkpoint
taken every 512 KiB of log while serving, so that workers killed mid-scenario start from one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Stack
from tests.support.stack import started

FAULT_ENV = {
    "FERRYMQ_LEADER_LEASE_SECONDS": "2",
    "FERRYMQ_REPLICA_MAX_LAG_SECONDS": "1",
    "FERRYMQ_WORKER_REQUEST_TIMEOUT_SECONDS": "3",
    "FERRYMQ_LEADER_HANDOVER_SECONDS": "3",
    # Checkpoints often and at a fixed interval, so that faults land while they are written.
    "FERRYMQ_WORKER_CHECKPOINT_BYTES": str(512 * 1024),
    "FERRYMQ_WORKER_CHECKPOINT_MAX_BYTES": "0",
}


def fault_stack(tmp_path_factory: pytest.TempPathFactory, name: str, **env: str) -> Iterator[Stack]:
    """A started stack with FAULT_ENV and ``env``, stopped when the generator is closed."""
    yield from started(Path(tmp_path_factory.mktemp(name)), {**FAULT_ENV, **env})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from fault_stack(tmp_path_factory, "fault-stack")
