"""``ferrymq up`` on a data directory of stacks that ran one worker per partition: their logs move to the one
worker that now serves every partition."""

from __future__ import annotations

from pathlib import Path

from ferrymq.infra.local_stack import WORKER_ID, adopt_worker_per_partition_logs
from ferrymq.settings import Settings

SEGMENT = f"{1:020d}.seg"


def test_the_logs_of_a_worker_per_partition_move_to_the_one_worker(tmp_path: Path) -> None:
    # given the directories of workers 0, 1 and 2, each with its partition's segment directly in it
    workers = tmp_path / "workers"
    for partition in range(3):
        (workers / f"worker-{partition}").mkdir(parents=True)
        (workers / f"worker-{partition}" / SEGMENT).write_bytes(f"partition {partition}".encode())
    # when a stack of three partitions prepares its one worker
    moved = adopt_worker_per_partition_logs(Settings(data_dir=tmp_path, partitions=3))
    # then partitions 1 and 2 moved into that worker's p1 and p2; worker-0's own directory is left to the worker
    assert moved == 2
    assert WORKER_ID == "worker-0"
    for partition in (1, 2):
        assert (workers / WORKER_ID / f"p{partition}" / SEGMENT).read_bytes() == f"partition {partition}".encode()
        assert not (workers / f"worker-{partition}" / SEGMENT).exists()
    assert (workers / "worker-0" / SEGMENT).read_bytes() == b"partition 0"
    # and a second start moves nothing
    assert adopt_worker_per_partition_logs(Settings(data_dir=tmp_path, partitions=3)) == 0
