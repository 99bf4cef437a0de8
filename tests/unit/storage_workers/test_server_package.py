"""The storage server package names its parts without importing them: the CLI and ``ferrymq up`` read the log
layout alone, not the worker."""

from __future__ import annotations

import subprocess
import sys

import pytest

import ferrymq.storage.server as server
from ferrymq.storage.server import config, maintenance, process
from ferrymq.storage.server.worker import StorageWorker


def test_the_command_line_imports_no_part_of_the_worker() -> None:
    probe = ("import sys, ferrymq.infra.cli, ferrymq.infra.local_stack; "
             "print(sorted(m for m in sys.modules if m.startswith('ferrymq.storage.server.')))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "ferrymq.storage.server.layout" in loaded
    for part in ("worker", "process", "replica", "maintenance"):
        assert f"ferrymq.storage.server.{part}'" not in loaded


def test_each_name_is_its_module_s_and_an_unknown_one_is_refused() -> None:
    assert server.StorageWorker is StorageWorker
    assert server.run_worker is process.run_worker
    assert server.READY_LINE == process.READY_LINE
    assert server.WorkerConfig is config.WorkerConfig
    assert server.fold is maintenance.fold
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        server.Nothing  # noqa: B018
