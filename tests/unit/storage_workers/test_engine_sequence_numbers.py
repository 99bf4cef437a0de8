"""A partition's sequence numbers never go back: the log carries them, so a new leader (whatever its clock) and a
restarted worker go on from the last one; the SequenceNumbers clients see are drawn from them."""

from __future__ import annotations

from ferrymq.clock import ManualClock
from ferrymq.message_fields import sequence_number
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import Record
from tests.support.engine_requests import RECEIPT_KEY, RETENTION, fifo_message

Q = "000000000000/orders.fifo/1"


def _store(engine: Engine, *bodies: str) -> list[int]:
    return [r[2] for r in engine.store(Q, [fifo_message("g", b) for b in bodies], RETENTION, fifo=True)]


def test_a_new_leader_and_a_restart_go_on_from_the_log(clock: ManualClock) -> None:
    # given a leader that stored messages, and its records
    records: list[Record] = []
    leader = Engine(clock, RECEIPT_KEY, on_record=records.append)
    before = _store(leader, "a", "b")
    # when a follower whose clock is 10 s behind replays them and takes over
    follower = Engine(ManualClock(clock.now() - 10), RECEIPT_KEY, on_record=records.append,
                      partition=Engine.replay(clock, list(records), receipt_key=RECEIPT_KEY).partition)
    after = _store(follower, "c")
    # then its numbers go on from the leader's
    assert after[0] == before[-1] + 1
    # and so do they after a restart that replays the log with a clock a minute behind
    restarted = Engine.replay(ManualClock(clock.now() - 60), list(records), receipt_key=RECEIPT_KEY)
    later = _store(restarted, "d")
    assert later[0] == after[0] + 1
    shown = [sequence_number(s) for s in (*before, *after, *later)]
    assert shown == sorted(shown) and len(set(shown)) == 4
