"""Over random request histories: a checkpoint of the state after the first records, written and read back as a
worker does, with the rest of the records applied after it, holds the state a replay of every record gives and
answers every later request alike (``ferrymq.storage.log.checkpoint``)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.log.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from tests.fuzz.profiles import fuzz_settings
from tests.support.engine_requests import RECEIPT_KEY
from tests.unit.storage_workers.test_engine_properties import Run, _same_answers, histories


@given(histories, st.floats(0, 1))
@fuzz_settings(ci_examples=60)
def test_a_checkpoint_and_the_records_after_it_give_what_a_whole_replay_gives(
    history: list[tuple], cut: float
) -> None:
    # given the records of a random history, and a point among them
    run = Run()
    for op in history:
        run.step(op)
    at = round(cut * len(run.records))
    head, tail = run.records[:at], run.records[at:]
    now = run.clock.now()
    # when the state after the first records is written as a checkpoint and read back
    before = Engine.replay(ManualClock(now), head, receipt_key=RECEIPT_KEY)
    with tempfile.TemporaryDirectory() as tmp:
        write_checkpoint(Path(tmp), Checkpoint(max(at, 1), [], {}, before.partition))
        loaded = read_checkpoint(Path(tmp))
    assert loaded is not None
    # and the records after it are applied to it
    restored = Engine(ManualClock(now), RECEIPT_KEY, partition=loaded.state)
    for record in tail:
        restored.apply(record)
    # then it is the state every record replayed gives, and answers alike from here on
    whole = Engine.replay(ManualClock(now), run.records, receipt_key=RECEIPT_KEY)
    _same_answers([whole, restored])
