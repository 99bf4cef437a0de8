"""Over random request histories: a checkpoint of the state after the first records (a base, or a base and deltas),
written and read back as a worker does, with the rest of the records applied after it, holds the state a replay of
every record gives and answers every later request alike (``ferrymq.storage.log.checkpoint``)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from unittest.mock import patch

from hypothesis import given
from hypothesis import strategies as st

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.log import checkpoint_chain
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


@given(histories, st.lists(st.floats(0, 1), min_size=2, max_size=4))
@fuzz_settings(ci_examples=40)
def test_a_base_and_deltas_and_the_records_after_them_give_what_a_whole_replay_gives(
    history: list[tuple], cuts: list[float]
) -> None:
    # given the records of a random history, and points among them
    run = Run()
    for op in history:
        run.step(op)
    points = sorted(max(round(cut * len(run.records)), 1) for cut in cuts)
    now = run.clock.now()
    # when the state at each point is written in turn, as a base and deltas (chunks of 64 bytes, every array but
    # empty ones apart from the pickle, and no new base for the deltas' size, so that small histories make chains)
    with (
        tempfile.TemporaryDirectory() as tmp,
        patch.object(checkpoint_chain, "CHUNK", 64),
        patch.object(checkpoint_chain, "OUT_OF_BAND_MIN", 1),
        patch.object(checkpoint_chain, "DELTAS_UP_TO", 10**9),
    ):
        state = Engine(ManualClock(now), receipt_key=RECEIPT_KEY)
        applied = 0
        for at in points:
            for record in run.records[applied:at]:
                state.apply(record)
            applied = at
            write_checkpoint(Path(tmp), Checkpoint(at, [], {}, state.partition))
        loaded = read_checkpoint(Path(tmp))
    assert loaded is not None and loaded.offset == points[-1] and loaded.deltas == len(points) - 1
    # and the records after the last are applied to what is loaded
    restored = Engine(ManualClock(now), RECEIPT_KEY, partition=loaded.state)
    for record in run.records[points[-1]:]:
        restored.apply(record)
    # then it is the state every record replayed gives, and answers alike from here on
    whole = Engine.replay(ManualClock(now), run.records, receipt_key=RECEIPT_KEY)
    _same_answers([whole, restored])
