"""One SparkSession for the whole test run (starting one costs 6-8 s), local, small, UI off.

Registered for every test level by ``pytest_plugins`` in tests/conftest.py; only tests that ask for
``spark`` start it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from ferrymq.spark import session

    started = session.build("ferrymq-tests", "local[2]")
    # Even fewer shuffle partitions than a local job: test frames have a few thousand rows.
    started.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        yield started
    finally:
        started.stop()
