"""The static role of one partition replica: its leader's replica set and acknowledgement mode, or the
address of the leader a follower pulls from.  Elections (a later step) will assign these instead."""

from __future__ import annotations

from dataclasses import dataclass

from ferrymq.replication_rules import Acks

DEFAULT_TAIL_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class LeaderRole:
    """This worker leads the partition.  The default is the single-copy mode: no followers, ``acks=leader``."""

    replicas: tuple[str, ...] = ()
    """Worker ids of the replica set, this worker's included; empty means this worker alone."""
    isr: frozenset[str] | None = None
    """The in-sync set as given; None means every replica."""
    acks: Acks = Acks.LEADER
    epoch: int = 0
    """The epoch this leader appends under and fetches must carry."""
    tail_bytes: int = DEFAULT_TAIL_BYTES
    """Payload bytes of recent records kept in memory for followers; older ones are read from the log."""
    answers_until_ms: int | None = None
    """Until when (ms on the worker's monotonic clock, never wall time: a stepped wall clock must not lengthen
    it) the lease lets this leader answer requests (``replication_rules.answers_until``); the controller
    extends it at each renewal. None: no lease (a worker outside any cluster)."""

    def __post_init__(self) -> None:
        if self.epoch < 0:
            raise ValueError(f"an epoch is not negative: {self.epoch}")
        if self.tail_bytes < 1:
            raise ValueError(f"the tail buffer holds at least one byte: {self.tail_bytes}")


@dataclass(frozen=True)
class FollowerRole:
    """This worker follows the partition's leader at ``leader`` (host, port), fetching under ``epoch``."""

    leader: tuple[str, int]
    epoch: int = 0
    max_bytes: int = 1024 * 1024
    """About how many payload bytes one FETCH asks for."""
    wait_ms: int = 500
    """How long a FETCH waits at the leader when there is nothing new."""
    retry_seconds: float = 0.2
    """Pause before fetching again after the leader could not be reached or refused."""

    def __post_init__(self) -> None:
        if self.epoch < 0:
            raise ValueError(f"an epoch is not negative: {self.epoch}")
        if self.max_bytes < 1 or self.wait_ms < 0 or self.retry_seconds < 0:
            raise ValueError("max_bytes is positive, wait_ms and retry_seconds are not negative")
