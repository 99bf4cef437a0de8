"""The files a running ``ferrymq up`` leaves for the admin commands, and its data-directory lock: each file is
removed only by the ``up`` that wrote it, and one ``up`` at a time holds a data directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ferrymq.infra import aws_target, stack_endpoint
from ferrymq.infra.data_dir_lock import DataDirInUse, DataDirLock
from ferrymq.infra.standin import layout
from ferrymq.settings import Settings


def test_the_gateway_file_of_another_up_is_not_forgotten(tmp_path: Path) -> None:
    # given a gateway file written by another live process
    settings = Settings(data_dir=tmp_path)
    other = {"endpoint": "http://127.0.0.1:4", "pid": os.getppid()}
    stack_endpoint.path(settings).write_text(json.dumps(other))
    # when this process forgets its gateway, then the other's file stays and still names it
    stack_endpoint.forget(settings)
    assert stack_endpoint.running(settings) == "http://127.0.0.1:4"
    # and a file of its own is removed, and forgetting twice is harmless
    stack_endpoint.record(settings, "http://127.0.0.1:5")
    stack_endpoint.forget(settings)
    stack_endpoint.forget(settings)
    assert not stack_endpoint.path(settings).exists()


def test_an_unreadable_gateway_file_is_removed(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path)
    stack_endpoint.path(settings).write_text("{not json")
    stack_endpoint.forget(settings)
    assert not stack_endpoint.path(settings).exists()


def test_the_endpoint_file_of_another_stand_in_is_not_removed(tmp_path: Path) -> None:
    # given the endpoint file naming another up's stand-in
    settings = Settings(data_dir=tmp_path)
    aws_target.standin_dir(settings).mkdir()
    aws_target.write_endpoint_file(settings, "http://127.0.0.1:6")
    path = aws_target.standin_dir(settings) / layout.ENDPOINT_FILE
    # when an up whose stand-in listened elsewhere removes its own, then the file stays
    aws_target.remove_endpoint_file(settings, "http://127.0.0.1:7")
    assert path.read_text() == "http://127.0.0.1:6\n"
    # and the up that wrote it removes it, and a second removal is harmless
    aws_target.remove_endpoint_file(settings, "http://127.0.0.1:6")
    aws_target.remove_endpoint_file(settings, "http://127.0.0.1:6")
    assert not path.exists()


def test_one_process_at_a_time_holds_a_data_directory(tmp_path: Path) -> None:
    # given the lock held by another process
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, pathlib; from ferrymq.infra.data_dir_lock import DataDirLock; "
         "DataDirLock.acquire(pathlib.Path(sys.argv[1])); print('held', flush=True); sys.stdin.read()",
         str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        # when this process asks for it, then it is refused naming the holder
        with pytest.raises(DataDirInUse, match=rf"another ferrymq up \(pid {holder.pid}\) is running on "):
            DataDirLock.acquire(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    # and once the holder is gone (killed: flock goes with it) the directory is free, and free again on release
    DataDirLock.acquire(tmp_path).release()
    DataDirLock.acquire(tmp_path).release()
