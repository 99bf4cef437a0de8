"""A stopped worker process leaves with its exit status even while a thread still waits on a call."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import threading, time
from ferrymq.storage.server.exit_guard import exit_within
threading.Thread(target=time.sleep, args=(60,), name="stuck-call").start()
exit_within({code}, 0.2)
"""


def test_a_thread_stuck_in_a_call_does_not_hold_the_exit_and_the_status_is_kept() -> None:
    for code in (0, 3):
        done = subprocess.run([sys.executable, "-c", SCRIPT.format(code=code)], capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == code
        assert "stuck-call" in done.stderr


def test_a_process_that_exits_by_itself_is_not_held_by_the_timer() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from ferrymq.storage.server.exit_guard import exit_within\nexit_within(5, 30)"],
        capture_output=True, text=True, timeout=20,
    )
    assert done.returncode == 0 and done.stderr == ""
