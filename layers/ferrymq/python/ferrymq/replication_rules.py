"""The rules of replica-set coordination, as pure functions: no I/O, no clock, no boto3.

A partition lives on a replica set of workers: one leader, the rest followers (docs/design/replication.md).
The DynamoDB adapter (:mod:`ferrymq.aws.replica_sets`) enforces the rules that guard its items with
conditional writes; the functions here say the same in Python, so a worker can decide what to attempt, and
the adapter can tell why a write was refused. The replication rules the worker applies on its own (high
watermark, when to shrink the in-sync set, where a rejoining follower cuts its log) live here too.

Times are integer milliseconds since the Unix epoch. Offsets follow the log: a replica's *log end* is the
offset after its last durable record, and so is every acknowledgement a follower sends.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum


class Acks(StrEnum):
    """How many replicas must hold a record before the leader acknowledges it."""

    LEADER = "leader"
    """Only the leader's own log: today's single-copy mode, kept for benchmarks."""
    MAJORITY = "majority"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class ReplicaSet:
    """One partition's coordination item, decoded."""

    partition: int
    cluster: str
    replicas: tuple[str, ...]
    """In preference order: ``replicas[0]`` is the preferred leader."""
    leader: str
    epoch: int
    isr: frozenset[str]
    lease_until: int
    """The leader's lease runs up to and including this millisecond."""
    acks: Acks
    leader_address: tuple[str, int] | None = None
    """Where the leader listens for the worker RPC, as its claim published it; None before any claim."""
    replication_address: tuple[str, int] | None = None
    """Where followers fetch from, when the claim named an address apart from ``leader_address``."""

    @property
    def fetch_address(self) -> tuple[str, int] | None:
        """Where the leader's followers fetch from."""
        return self.replication_address or self.leader_address


# --- leadership ------------------------------------------------------------------------------------


def lease_expired(rs: ReplicaSet, now_ms: int) -> bool:
    return rs.lease_until < now_ms


def is_leader(rs: ReplicaSet, me: str, epoch: int) -> bool:
    """Whether ``me`` still leads the partition in ``epoch``: the test every leader-only write is fenced by."""
    return rs.leader == me and rs.epoch == epoch


LEASE_ALLOWANCE_FRACTION = 0.2
"""The part of a lease its holder does not use: a leader answers until this much of the lease is left on its
own monotonic clock, counted from *before* the write that claimed or renewed it.  Another worker claims only
once the stored expiry (wall time, ``lease_until``) has passed on its own wall clock, so this is the allowance
for how far a worker's wall clock may run ahead of the leader's (and for clock rates differing over a lease);
it is the only place where two machines' clocks are assumed to agree."""


def lease_allowance_ms(lease_ms: int) -> int:
    """The allowance (ms) of a lease of ``lease_ms`` (see ``LEASE_ALLOWANCE_FRACTION``)."""
    return int(lease_ms * LEASE_ALLOWANCE_FRACTION)


def answers_until(granted_at_ms: int, lease_ms: int) -> int:
    """Until when (ms, on the leader's monotonic clock) a leader whose lease was granted or renewed by a write
    sent at ``granted_at_ms`` (the same clock) may answer requests: the lease less its allowance, so that a
    worker whose wall clock runs up to that much ahead, claiming as soon as the lease looks lapsed to it,
    never finds this leader still answering, whatever the wall clocks are stepped by meanwhile.  Answering
    needs the lease even for a request that writes nothing (a delete naming an old receipt, counts, an empty
    receive): a deposed leader's state may be stale, and only records it appends are fenced by epochs."""
    return granted_at_ms + lease_ms - lease_allowance_ms(lease_ms)


def may_claim(rs: ReplicaSet, me: str, now_ms: int) -> bool:
    """Whether ``me`` may take the next epoch of the partition as ``rs`` shows it.

    Only an in-sync replica may: it holds every acknowledged record, so electing it loses none. Another
    leader's live lease is respected, because its holder may still be serving. The leader itself may claim
    through its own lease: that is a restarted leader, which must not go on in the epoch it had before the
    crash, since records it appended then but never replicated would be indistinguishable from replicated
    ones; the new epoch sets them apart, and followers truncate them away.
    """
    return me in rs.isr and (lease_expired(rs, now_ms) or rs.leader == me)


# --- in-sync set and high watermark --------------------------------------------------------------------


def acks_satisfied(mode: Acks, replicas: Collection[str], isr: Collection[str]) -> bool:
    """Whether the leader may acknowledge at all with this in-sync set.

    ``majority``: the in-sync set holds a majority of the replica set, so any majority that survives
    still has an in-sync member to elect; ``all``: every replica is in sync; ``leader``: always.
    """
    if mode is Acks.LEADER:
        return True
    in_sync = len(set(replicas) & set(isr))
    if mode is Acks.ALL:
        return in_sync == len(set(replicas))
    return 2 * in_sync > len(set(replicas))


def high_watermark(isr: Collection[str], acked_offsets: Mapping[str, int]) -> int:
    """The log end every in-sync member has made durable: records below it may be acknowledged.

    ``acked_offsets`` holds each member's acknowledged log end, the leader's own durable log end included.
    A member that has acknowledged nothing yet counts as 0, so a new leader answers nothing until every
    in-sync follower has reported. Whether the leader may acknowledge at all is :func:`acks_satisfied`.
    """
    if not isr:
        raise ValueError("an in-sync set always holds its leader")
    return min(acked_offsets.get(member, 0) for member in isr)


def must_shrink(
    leader: str,
    isr: Collection[str],
    acked: Mapping[str, int],
    leader_leo: int,
    max_lag_ms: int,
    now_ms: int,
    last_caught_up: Mapping[str, int],
) -> frozenset[str]:
    """The followers to drop from the in-sync set: behind the leader, and not caught up for over ``max_lag_ms``.

    Lag is measured in time, not records, so a burst of appends does not evict a healthy follower.
    ``last_caught_up[f]`` is the last time ``f``'s acknowledgement reached the leader's log end of that
    moment; the leader seeds it with the start of its term, and a follower missing from it counts as never
    caught up. The leader is never dropped from its own set.
    """
    return frozenset(
        member
        for member in isr
        if member != leader
        and acked.get(member, 0) < leader_leo
        and (member not in last_caught_up or now_ms - last_caught_up[member] > max_lag_ms)
    )


# --- membership ------------------------------------------------------------------------------------------


def heartbeat_fresh(heartbeat_at: int, now_ms: int, grace_ms: int) -> bool:
    """Whether a worker that last heartbeat at ``heartbeat_at`` is still alive at ``now_ms``."""
    return now_ms - heartbeat_at <= grace_ms


# --- truncation of a diverged tail by epoch --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EpochStart:
    """One entry of a replica's epoch history: records from ``first_offset`` on were appended in ``epoch``."""

    epoch: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class EpochEnd:
    """A leader's answer about an epoch: the largest ``epoch`` it knows that is not above the one asked
    about, and ``end_offset``, the offset where that epoch's records end in its log."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class TruncateTo:
    """Cut the log so that ``offset`` is its new log end (a no-op when it already is)."""

    offset: int


@dataclass(frozen=True, slots=True)
class AskAbout:
    """Ask the leader for its end of ``epoch`` and apply :func:`truncation_point` to the answer."""

    epoch: int


def first_question(history: Sequence[EpochStart]) -> AskAbout | None:
    """What a rejoining follower asks the leader first: about its latest epoch; ``None`` for an empty log."""
    return AskAbout(history[-1].epoch) if history else None


def end_offset_for_epoch(history: Sequence[EpochStart], log_end: int, epoch: int) -> EpochEnd | None:
    """The leader's answer to a follower asking about ``epoch``; ``None`` when its history starts above it
    (the follower's log predates everything the leader can vouch for: it needs a snapshot).

    ``history`` is in ascending epoch order. An epoch ends where the next one starts, the latest at the
    log end.
    """
    index = _last_at_or_below(history, epoch)
    if index is None:
        return None
    end = history[index + 1].first_offset if index + 1 < len(history) else log_end
    return EpochEnd(history[index].epoch, end)


def truncation_point(
    my_history: Sequence[EpochStart], my_log_end: int, answer: EpochEnd | None
) -> TruncateTo | AskAbout:
    """Where a rejoining follower cuts its log, given the leader's answer to its last question.

    Records of one epoch were all appended by that epoch's one leader, so where both logs have epoch E
    they agree up to the smaller of the two ends of E; everything the follower has in epochs the leader
    lacks diverged. When the leader's answer names an epoch the follower never had, their common ground is
    older still, and the follower asks about its own previous epoch: each question names a lower epoch,
    so the exchange ends.
    """
    if not my_history:
        return TruncateTo(my_log_end)
    if answer is None:
        return TruncateTo(my_history[0].first_offset)
    mine = _last_at_or_below(my_history, answer.epoch)
    if mine is None:
        # All of this log is in epochs above the leader's answer, none of which the leader has.
        return TruncateTo(my_history[0].first_offset)
    if my_history[mine].epoch == answer.epoch:
        my_end = my_history[mine + 1].first_offset if mine + 1 < len(my_history) else my_log_end
        return TruncateTo(min(answer.end_offset, my_end))
    return AskAbout(my_history[mine].epoch)


def _last_at_or_below(history: Sequence[EpochStart], epoch: int) -> int | None:
    found = None
    for index, entry in enumerate(history):
        if entry.epoch > epoch:
            break
        found = index
    return found
