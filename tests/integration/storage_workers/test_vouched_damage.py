"""A worker process whose sealed segment was damaged while it was stopped starts from its checkpoint without
reading that segment, serves, and then finds the damage by the segment's CRC-32: it deletes the checkpoint and
exits as after a log failure, and its next start walks the log and names the damaged range."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from ferrymq.storage.log.checkpoint import FILE_NAME, read_checkpoint
from tests.integration.conftest import WorkerProcess
from tests.integration.storage_workers.test_worker_process import send_rounds
from tests.support.log_files import flip, frames_of

SMALL_SEGMENTS = {"FERRYMQ_WORKER_SEGMENT_BYTES": str(16 * 1024)}


def test_a_sealed_segment_damaged_while_stopped_is_found_after_the_start_and_named_at_the_next(
    start_worker: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    data_dir = tmp_path / "w"
    worker = start_worker(data_dir, extra_args=["--no-register"], env=SMALL_SEGMENTS)
    asyncio.run(send_rounds(worker, 20))
    assert worker.terminate() == 0
    # given the checkpoint of a clean stop, and a byte of a sealed segment it vouches for flipped since
    found = read_checkpoint(data_dir / "p0")
    assert found is not None and len(found.segments) > 2
    sealed = data_dir / "p0" / f"{found.segments[1][0]:020d}.seg"
    frame = frames_of(sealed)[3]
    flip(sealed, frame.start + 12)

    # when it starts again: it starts from the checkpoint without reading that segment, then stops on its own,
    # naming the segment (the check of a segment this small may end before the worker has said it is ready)
    try:
        again = start_worker(data_dir, extra_args=["--no-register"], env=SMALL_SEGMENTS)
    except AssertionError as exc:
        err = str(exc)
        assert "exited with 1 before it was ready" in err, err[-3000:]
    else:
        assert again.proc.wait(20) == 1
        err = again.stderr()
    assert "starting from the checkpoint" in err
    assert f"{sealed}: its first" in err and "no longer have the CRC-32 the checkpoint recorded" in err
    assert "stopped after a log failure" in err
    assert not (data_dir / "p0" / FILE_NAME).exists()

    # and the start after that walks the log and finds the damaged frame, as any start without a checkpoint
    try:
        start_worker(data_dir, extra_args=["--no-register"], env=SMALL_SEGMENTS)
    except AssertionError as exc:
        refused = str(exc)
    else:
        raise AssertionError("a worker outside any cluster started on its only partition's damaged log")
    assert f"{sealed}: damaged frame at byte {frame.start}" in refused, refused[-3000:]
