"""The leader's commit tracker: the high watermark over the in-sync set, the acks modes, and replies that wait
for it in order."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from ferrymq.replication_rules import Acks, acks_satisfied, high_watermark
from ferrymq.storage.replication.commit import CommitTracker


class StandInLog:
    """A log writer's durability as the tracker sees it, moved by hand."""

    def __init__(self, end_offset: int = 1) -> None:
        self.end_offset = end_offset
        self.durable_offset = end_offset
        self.waiters: list[tuple[int, Callable[[Any], None], Any]] = []

    def append(self, n: int) -> None:
        self.end_offset += n

    def sync(self) -> None:
        self.durable_offset = self.end_offset
        due = [w for w in self.waiters if w[0] < self.durable_offset]
        self.waiters = [w for w in self.waiters if w[0] >= self.durable_offset]
        for _, callback, arg in due:
            callback(arg)

    def when_offset_durable(self, offset: int, callback: Callable[[Any], None], arg: Any) -> None:
        if offset < self.durable_offset:
            callback(arg)
        else:
            self.waiters.append((offset, callback, arg))


def tracker(log: StandInLog, acks: Acks, replicas: tuple[str, ...] = ("a", "b", "c"), **kwargs: Any) -> CommitTracker:
    return CommitTracker("a", log, acks=acks, replicas=replicas, **kwargs)


def test_acks_all_commits_what_every_replica_has_durable_and_answers_waiters_in_order() -> None:
    # given a leader of three replicas in acks=all with records 1..3 durable on the leader alone
    log = StandInLog()
    commits = tracker(log, Acks.ALL)
    log.append(3)
    log.sync()
    answered: list[str] = []
    commits.when_committed(1, answered.append, "first")
    commits.when_committed(3, answered.append, "third")
    commits.advance()
    assert answered == [] and commits.high_watermark == 0
    # when one follower acknowledges all of them, then nothing is committed yet
    commits.ack("b", 4)
    assert answered == [] and commits.waiting == 2
    # when the other acknowledges up to offset 2, then the record at offset 1 is
    commits.ack("c", 2)
    assert answered == ["first"] and commits.high_watermark == 2
    # and once it has them all, the rest
    commits.ack("c", 4)
    assert answered == ["first", "third"] and commits.high_watermark == 4
    # and a waiter on a committed offset runs at once
    commits.when_committed(2, answered.append, "late")
    assert answered[-1] == "late"


def test_the_leaders_own_fsync_counts_toward_the_high_watermark() -> None:
    # given followers that acknowledge records the leader has not made durable yet
    log = StandInLog()
    commits = tracker(log, Acks.ALL, replicas=("a", "b"))
    log.append(2)
    answered: list[str] = []
    commits.when_committed(2, answered.append, "reply")
    commits.ack("b", 3)
    assert answered == []
    # when the leader's log syncs and the tracker is told, then the reply goes
    log.sync()
    commits.advance()
    assert answered == ["reply"]


def test_acks_majority_needs_a_majority_of_acknowledgements_and_an_in_sync_majority() -> None:
    # given three replicas in acks=majority, every one in sync
    log = StandInLog()
    commits = tracker(log, Acks.MAJORITY, isr={"a", "b"})
    log.append(1)
    log.sync()
    answered: list[str] = []
    commits.when_committed(1, answered.append, "reply")
    # when the in-sync follower acknowledges, then it is committed (the out-of-sync one is not waited for)
    commits.ack("b", 2)
    assert answered == ["reply"]
    # given an in-sync set that is no majority, then the high watermark does not move at all
    stalled_log = StandInLog()
    stalled = tracker(stalled_log, Acks.MAJORITY, isr={"a"})
    stalled_log.append(1)
    stalled_log.sync()
    stalled.when_committed(1, answered.append, "never")
    stalled.advance()
    assert answered == ["reply"] and stalled.high_watermark == 0


def test_acks_leader_is_the_leaders_durability_and_ignores_followers() -> None:
    # given acks=leader with two followers that never acknowledge
    log = StandInLog()
    commits = tracker(log, Acks.LEADER)
    log.append(1)
    answered: list[str] = []
    # when a reply waits for its record, then it is handed to the log, and answered once the log syncs
    commits.when_committed(1, answered.append, "reply")
    assert answered == [] and len(log.waiters) == 1
    log.sync()
    assert answered == ["reply"] and commits.high_watermark == 2


def test_acknowledgements_never_move_the_high_watermark_back_and_are_checked() -> None:
    log = StandInLog()
    commits = tracker(log, Acks.ALL, replicas=("a", "b"))
    log.append(2)
    log.sync()
    commits.ack("b", 3)
    # a late, lower acknowledgement changes nothing
    commits.ack("b", 2)
    assert commits.high_watermark == 3 and commits.acked == {"b": 3}
    # a stranger, the leader itself, or an acknowledgement past the leader's log end are refused
    for replica, offset in (("z", 1), ("a", 1), ("b", 4)):
        with pytest.raises(ValueError):
            commits.ack(replica, offset)
    # and the leader belongs to its replica and in-sync sets
    with pytest.raises(ValueError):
        CommitTracker("a", log, replicas=("b", "c"))
    with pytest.raises(ValueError):
        CommitTracker("a", log, replicas=("a", "b"), isr={"b"})


@pytest.mark.parametrize("acks", [Acks.MAJORITY, Acks.ALL])
@pytest.mark.parametrize("seed", range(20))
def test_the_high_watermark_follows_the_rules_over_random_acks_syncs_and_set_changes(acks: Acks, seed: int) -> None:
    rng = random.Random(seed)
    log = StandInLog()
    t = tracker(log, acks, ("a", "b", "c", "d", "e"))
    expected = 0
    for _ in range(200):
        # given any mix of appends, the leader's syncs, acknowledgements and in-sync set changes
        step = rng.random()
        if step < 0.3:
            log.append(rng.randint(1, 3))
        elif step < 0.45:
            log.sync()
            t.advance()
        elif step < 0.9:
            replica = rng.choice(["b", "c", "d", "e"])
            t.ack(replica, rng.randint(t.acked.get(replica, 0), log.end_offset))
        else:
            t.set_isr({"a", *rng.sample(["b", "c", "d", "e"], rng.randint(0, 4))})
        # then the tracker's high watermark is the rules' own, never moving back, and still while too few are in sync
        if acks_satisfied(acks, t.replicas, t.isr):
            expected = max(expected, high_watermark(t.isr, {**t.acked, "a": log.durable_offset}))
        assert t.high_watermark == expected
