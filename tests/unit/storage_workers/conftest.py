"""An engine on a manual clock whose records the test can read, for every engine test of this folder."""

from __future__ import annotations

import pytest

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import Record
from tests.support.engine_requests import RECEIPT_KEY


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def records() -> list[Record]:
    return []


@pytest.fixture
def engine(clock: ManualClock, records: list[Record]) -> Engine:
    return Engine(clock, RECEIPT_KEY, on_record=records.append)
