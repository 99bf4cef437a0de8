"""The pure rules of replica-set coordination: leadership, in-sync set, high watermark, truncation by epoch."""

from __future__ import annotations

import random

import pytest

from ferrymq.replication_rules import (
    Acks,
    AskAbout,
    EpochEnd,
    EpochStart,
    ReplicaSet,
    TruncateTo,
    acks_satisfied,
    answers_until,
    end_offset_for_epoch,
    first_question,
    heartbeat_fresh,
    high_watermark,
    is_leader,
    lease_expired,
    may_claim,
    must_shrink,
    truncation_point,
)

NOW = 1_700_000_000_000
LED_BY_A = ReplicaSet(
    partition=7,
    cluster="c1",
    replicas=("a", "b", "c"),
    leader="a",
    epoch=4,
    isr=frozenset({"a", "b"}),
    lease_until=NOW,
    acks=Acks.MAJORITY,
)


# --- leadership --------------------------------------------------------------------------------------


def test_the_lease_runs_through_its_last_millisecond() -> None:
    assert not lease_expired(LED_BY_A, NOW)
    assert lease_expired(LED_BY_A, NOW + 1)


def test_an_in_sync_follower_may_claim_only_once_the_leaders_lease_has_lapsed() -> None:
    assert not may_claim(LED_BY_A, "b", NOW)
    assert may_claim(LED_BY_A, "b", NOW + 1)


def test_a_replica_outside_the_in_sync_set_may_never_claim() -> None:
    # c is assigned but lagging; d is not even assigned
    assert not may_claim(LED_BY_A, "c", NOW + 60_000)
    assert not may_claim(LED_BY_A, "d", NOW + 60_000)


def test_a_restarted_leader_may_claim_through_its_own_live_lease() -> None:
    # so that it takes a new epoch instead of carrying on in the one its crash interrupted
    assert may_claim(LED_BY_A, "a", NOW - 1_000)


def test_leadership_is_the_pair_of_worker_and_epoch() -> None:
    assert is_leader(LED_BY_A, "a", 4)
    assert not is_leader(LED_BY_A, "a", 3)
    assert not is_leader(LED_BY_A, "b", 4)


# --- acknowledgement modes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "replicas", "isr", "expected"),
    [
        (Acks.MAJORITY, "abc", "ab", True),
        (Acks.MAJORITY, "abc", "a", False),
        (Acks.MAJORITY, "abcd", "ab", False),  # half is not a majority
        (Acks.MAJORITY, "abcd", "abc", True),
        (Acks.MAJORITY, "abc", "ax", False),  # an in-sync id that is not a replica does not count
        (Acks.MAJORITY, "a", "a", True),
        (Acks.ALL, "abc", "abc", True),
        (Acks.ALL, "abc", "ab", False),
        (Acks.LEADER, "abc", "a", True),
    ],
)
def test_acks_satisfied(mode: Acks, replicas: str, isr: str, expected: bool) -> None:
    assert acks_satisfied(mode, list(replicas), set(isr)) is expected


# --- high watermark and in-sync set ------------------------------------------------------------------


def test_high_watermark_is_the_smallest_log_end_in_the_in_sync_set() -> None:
    # given a leader at 20, an in-sync follower at 14 and a lagging one outside the set at 3
    acked = {"a": 20, "b": 14, "c": 3}
    # then only the in-sync members decide
    assert high_watermark({"a", "b"}, acked) == 14
    assert high_watermark({"a"}, acked) == 20


def test_an_in_sync_member_that_has_not_acknowledged_holds_the_high_watermark_at_zero() -> None:
    assert high_watermark({"a", "b"}, {"a": 20}) == 0


def test_an_empty_in_sync_set_is_refused() -> None:
    with pytest.raises(ValueError):
        high_watermark(set(), {"a": 1})


def test_a_follower_behind_and_not_caught_up_for_longer_than_the_limit_is_dropped() -> None:
    # given b behind the leader's 20 and last caught up 10.001 s ago, c behind but caught up 2 s ago
    acked = {"a": 20, "b": 15, "c": 18}
    caught_up = {"b": NOW - 10_001, "c": NOW - 2_000}
    # when the limit is 10 s, then only b goes
    assert must_shrink("a", {"a", "b", "c"}, acked, 20, 10_000, NOW, caught_up) == {"b"}


def test_lag_of_exactly_the_limit_is_still_in_sync() -> None:
    assert must_shrink("a", {"a", "b"}, {"a": 20, "b": 15}, 20, 10_000, NOW, {"b": NOW - 10_000}) == frozenset()


def test_a_follower_at_the_leaders_log_end_stays_however_long_ago_it_last_caught_up() -> None:
    # an idle partition: nothing appended for a minute, the follower has everything
    assert must_shrink("a", {"a", "b"}, {"a": 20, "b": 20}, 20, 10_000, NOW, {"b": NOW - 60_000}) == frozenset()


def test_a_follower_never_seen_caught_up_counts_as_lagging() -> None:
    assert must_shrink("a", {"a", "b"}, {"a": 20, "b": 19}, 20, 10_000, NOW, {}) == {"b"}


def test_the_leader_is_never_dropped_from_its_own_set() -> None:
    # even with no acknowledgement or catch-up time recorded for itself
    assert must_shrink("a", {"a", "b"}, {"b": 20}, 20, 10_000, NOW, {"b": NOW}) == frozenset()


def test_a_heartbeat_is_fresh_through_the_last_millisecond_of_the_grace_period() -> None:
    assert heartbeat_fresh(NOW, NOW + 10_000, 10_000)
    assert not heartbeat_fresh(NOW, NOW + 10_001, 10_000)


# --- truncation by epoch -------------------------------------------------------------------------------


def history(*pairs: tuple[int, int]) -> list[EpochStart]:
    return [EpochStart(epoch, first) for epoch, first in pairs]


def test_the_leader_answers_with_the_end_of_the_largest_epoch_not_above_the_question() -> None:
    leader = history((1, 1), (2, 8), (4, 12))
    assert end_offset_for_epoch(leader, 20, 4) == EpochEnd(4, 20)  # the latest epoch ends at the log end
    assert end_offset_for_epoch(leader, 20, 1) == EpochEnd(1, 8)  # an older one where the next begins
    assert end_offset_for_epoch(leader, 20, 3) == EpochEnd(2, 12)  # an epoch it never had: the one before
    assert end_offset_for_epoch(leader, 20, 9) == EpochEnd(4, 20)
    assert end_offset_for_epoch(history((3, 40)), 50, 2) is None  # older than all it can vouch for


def test_a_follower_cuts_the_tail_a_crashed_leader_never_replicated() -> None:
    # given a follower that was leader in epoch 1 and appended up to 15, while the new leader took over at 10
    mine = history((1, 1))
    leader = history((1, 1), (2, 10))
    # when it asks about its latest epoch
    question = first_question(mine)
    assert question == AskAbout(1)
    answer = end_offset_for_epoch(leader, 20, question.epoch)
    # then it cuts at 10, where epoch 1 ended on the leader
    assert truncation_point(mine, 15, answer) == TruncateTo(10)


def test_a_follower_merely_behind_in_the_same_epoch_keeps_everything() -> None:
    mine = history((1, 1), (2, 10))
    assert truncation_point(mine, 12, EpochEnd(2, 20)) == TruncateTo(12)


def test_a_follower_that_never_had_the_leaders_epoch_asks_again_about_its_previous_one() -> None:
    # given: epoch 2's leader took over at 8 while the follower still had epoch 1 up to 10; the follower
    # then led epoch 3 from 10; the leader of epoch 4 never saw epoch 3
    mine = history((1, 1), (3, 10))
    leader = history((1, 1), (2, 8), (4, 12))
    # when the follower asks about epoch 3, the leader answers about epoch 2, which the follower never had
    first = truncation_point(mine, 15, end_offset_for_epoch(leader, 20, 3))
    assert first == AskAbout(1)
    # then the second answer puts the cut at 8, not at 10 where a single round would have left it
    assert truncation_point(mine, 15, end_offset_for_epoch(leader, 20, first.epoch)) == TruncateTo(8)


def test_a_log_entirely_in_epochs_the_leader_lacks_is_cut_whole() -> None:
    assert truncation_point(history((3, 10)), 15, EpochEnd(2, 12)) == TruncateTo(10)
    assert truncation_point(history((3, 10)), 15, None) == TruncateTo(10)


def test_an_empty_log_asks_nothing_and_cuts_nothing() -> None:
    assert first_question([]) is None
    assert truncation_point([], 1, EpochEnd(2, 12)) == TruncateTo(1)


def _random_logs(rng: random.Random) -> list[list[int]]:
    """Per epoch, the log its leader had when it stopped appending, as the epoch of each offset from 1.

    Each new leader starts from a prefix of some earlier leader's log (whatever it had replicated) and
    appends in its own epoch, which is how the protocol makes logs: so a record's (epoch, offset) names it.
    """
    logs: list[list[int]] = [[]]
    for epoch in range(1, rng.randint(2, 8)):
        base = rng.choice(logs)
        logs.append(base[: rng.randint(0, len(base))] + [epoch] * rng.randint(0, 5))
    return logs


def _history_of(log: list[int]) -> list[EpochStart]:
    out: list[EpochStart] = []
    for offset, epoch in enumerate(log, start=1):
        if not out or out[-1].epoch != epoch:
            out.append(EpochStart(epoch, offset))
    return out


def test_truncation_always_lands_on_where_the_two_logs_diverge() -> None:
    rng = random.Random(8)
    for _ in range(2_000):
        logs = _random_logs(rng)
        mine, leader = rng.choice(logs), rng.choice(logs)
        common = 0
        while common < min(len(mine), len(leader)) and mine[common] == leader[common]:
            common += 1
        my_history, leader_history = _history_of(mine), _history_of(leader)
        step = first_question(my_history) or TruncateTo(len(mine) + 1)
        while isinstance(step, AskAbout):
            step = truncation_point(
                my_history, len(mine) + 1, end_offset_for_epoch(leader_history, len(leader) + 1, step.epoch)
            )
        assert step == TruncateTo(common + 1), (mine, leader)


def test_a_leader_stops_answering_a_fifth_of_a_lease_before_another_may_claim() -> None:
    rs = ReplicaSet(partition=0, cluster="c", replicas=("a", "b"), leader="a", epoch=3, isr=frozenset({"a", "b"}),
                    lease_until=10_000 + 5_000, acks=Acks.MAJORITY)
    until = answers_until(10_000, 5_000)
    assert until == 14_000
    # b may claim only once the lease looks lapsed to it, a second after a stopped answering
    assert not may_claim(rs, "b", until) and not may_claim(rs, "b", rs.lease_until)
    assert may_claim(rs, "b", rs.lease_until + 1)
