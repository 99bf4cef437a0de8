"""A process started by ``ferrymq up`` notices its parent's end (``ferrymq.orphan_watch``): through a pidfd, waking
for nothing while the parent lives, or by looking every half second where no pidfd can be had."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ferrymq import orphan_watch

# A parent that starts a watcher of itself and then sleeps. The watcher writes, a second in, how many times it has
# slept and woken so far (its voluntary context switches), then, once orphaned, what the wait said and that count.
_PARENT = textwrap.dedent("""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]])
    print(child.pid, flush=True)
    time.sleep(600)
""")
_WATCHER = textwrap.dedent("""
    import asyncio, os, sys
    from ferrymq import orphan_watch
    if sys.argv[2] == "poll":
        def no_pidfd(pid):
            raise OSError("no pidfd here")
        os.pidfd_open = no_pidfd
    def switches():
        with open("/proc/self/status") as f:
            return int(next(line for line in f if line.startswith("voluntary_ctxt_switches")).split()[1])
    async def main():
        parent = os.getppid()
        asyncio.get_running_loop().call_later(1.0, lambda: open(sys.argv[1] + ".before", "w").write(str(switches())))
        orphaned = await orphan_watch.wait_until_orphaned(parent, lambda: False)
        open(sys.argv[1], "w").write(f"{orphaned} {switches()}")
    asyncio.run(main())
""")


def _watched_parent(tmp_path: Path, way: str) -> tuple[subprocess.Popen[str], Path]:
    marker = tmp_path / f"seen-{way}"
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, _WATCHER, str(marker), way], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    assert parent.stdout is not None
    parent.stdout.readline()
    return parent, marker


def _wait_for(path: Path, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path.name} never written"
        time.sleep(0.05)
    return path.read_text()


@pytest.mark.parametrize("way", ["pidfd", "poll"])
def test_a_watcher_whose_parent_is_killed_notices_within_a_second(tmp_path: Path, way: str) -> None:
    # given a watcher of its parent, waiting a few seconds while the parent lives
    parent, marker = _watched_parent(tmp_path, way)
    try:
        before = int(_wait_for(marker.with_suffix(".before"), 10))
        time.sleep(3)
        # when the parent is killed outright
        parent.kill()
        killed = time.monotonic()
        parent.wait()
        # then the watcher says it was orphaned, within a second
        seen, after = _wait_for(marker, 10).split()
        assert seen == "True" and time.monotonic() - killed < 1.5
        if way == "pidfd":
            # and, watching a pidfd, it was not woken while it waited (polling wakes it twice a second: 6 here)
            assert int(after) - before <= 2
    finally:
        parent.kill()
        parent.wait()


def test_polling_stops_when_the_caller_does() -> None:
    # where no pidfd can be had, ``stopping`` ends the wait: False, the parent being alive
    async def wait() -> bool:
        return await orphan_watch._poll(os.getppid(), lambda: True)

    assert asyncio.run(wait()) is False


def test_a_cancelled_watch_leaves_no_reader_behind() -> None:
    async def watch_then_cancel() -> int:
        task = asyncio.create_task(orphan_watch.wait_until_orphaned(os.getppid(), lambda: False))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return len(os.listdir("/proc/self/fd"))

    fds_before = len(os.listdir("/proc/self/fd"))
    # (the loop's own descriptors are gone once it closes: the count is taken inside, then compared after)
    asyncio.run(watch_then_cancel())
    assert len(os.listdir("/proc/self/fd")) <= fds_before
