"""An engine on a manual clock whose records the test can read, for every engine test of this folder."""

from __future__ import annotations

import pytest

from ferrymq.clock import ManualClock
from storage_workers.engine import Engine
from storage_workers.engine.records import Record


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def records() -> list[Record]:
    return []


@pytest.fixture
def engine(clock: ManualClock, records: list[Record]) -> Engine:
    return Engine(clock, on_record=records.append)
