"""The collector's settings for a started process (in a child process: they would change this one's)."""

from __future__ import annotations

import subprocess
import sys

from ferrymq.collector import YOUNG_THRESHOLD


def test_settle_freezes_what_the_start_made_and_makes_young_collections_rarer() -> None:
    script = (
        "import gc\n"
        "from ferrymq import collector\n"
        "import boto3\n"
        "before = gc.get_freeze_count()\n"
        "collector.settle()\n"
        "print(before, gc.get_freeze_count(), gc.get_threshold()[0], gc.isenabled())\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    before, frozen, young, enabled = int(out[0]), int(out[1]), int(out[2]), out[3]
    assert before == 0
    assert frozen > 10_000, "boto3's objects are frozen"
    assert young == YOUNG_THRESHOLD
    assert enabled == "True", "reference cycles are still collected"
