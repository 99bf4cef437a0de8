"""A partition's log found damaged at open: set aside and fetched again from a replica, or refused.

Recovery raises :class:`~ferrymq.storage.log.format.CorruptSegment` (:class:`~ferrymq.storage.log.segments.
DamagedLog` for a bad record with intact ones after it) and changes nothing.  The replica then holds no log and
refuses every request, naming the damage; the worker goes on serving its other partitions.  With replicas, the
copy is repaired (:func:`repair`) the way a new replica starts:

1. the worker takes itself out of the partition's in-sync set (``ReplicaSets.leave_isr``, one conditional
   write, before anything else): a copy that is about to hold less than it acknowledged may then no longer be
   elected, and a leader that counted its acknowledgements drops it too (``LeaderStream._lost_copy``).  A
   worker already outside the set is a lagging follower and needs no write;
2. the log directory is renamed ``<dir>.damaged-<UTC time>`` beside it, kept for inspection (nothing is
   deleted), and an empty log opened in its place;
3. the controller then has it follow the leader like any replica outside the set: state copy, then fetches;
   the leader adds it back to the in-sync set once it is caught up.  A leader whose term began before the
   leave still counts the replica in sync: the follower's first fetch says the copy was lost (a
   ``LOST_COPY`` file in the new directory until a leader heard it), and that leader drops it first.

Only when no other in-sync replica holds what this copy held (the worker is the set's last member, or the
partition has no replica set, or the worker is not one of its replicas) does the partition stay down: the
damaged log stays where it is, untouched, and status and logs name it (``ferrymq log salvage`` may cut it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ferrymq.aws.replica_sets import CoordinationError, NotInSync, ReplicaSets
from ferrymq.replication_rules import ReplicaSet
from ferrymq.storage.log.format import CorruptSegment
from ferrymq.storage.log.segments import DamagedLog, fsync_dir

if TYPE_CHECKING:
    from ferrymq.storage.server.replica import PartitionReplica

log = logging.getLogger(__name__)

QUARANTINE_MARK = ".damaged-"
LOST_COPY_MARK = "LOST_COPY"
LEAVE_ATTEMPTS = 5
"""Reads and conditional writes before giving up on leaving the in-sync set (each refusal is a change seen)."""


@dataclass(frozen=True)
class Damage:
    """What a replica found wrong with its log, and what became of the copy."""

    detail: str
    """Recovery's own words: the segment, the byte offset and the damaged range."""
    segment: str | None
    byte: int | None
    found_at: str
    set_aside: str | None = None
    """Where the damaged copy lies now, once set aside."""
    refused: str | None = None
    """Why it could not be repaired (the partition stays down on this worker)."""

    @classmethod
    def of(cls, exc: CorruptSegment, now: float) -> Damage:
        if isinstance(exc, DamagedLog):
            segment, byte = str(exc.path), exc.ranges[0].offset
        else:
            segment, byte = None, None
        return cls(detail=str(exc), segment=segment, byte=byte, found_at=_utc(now))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Verdict(Enum):
    LEAVE_THEN_SET_ASIDE = "leave the in-sync set, then set the copy aside"
    SET_ASIDE = "set the copy aside"
    REFUSE = "refuse"


def verdict(rs: ReplicaSet | None, me: str) -> tuple[Verdict, str]:
    """What to do with a damaged copy of the partition ``rs`` describes, held by worker ``me``; and why."""
    if rs is None:
        return Verdict.REFUSE, "the partition has no replica set: this copy is its only one"
    if me not in rs.replicas:
        return Verdict.REFUSE, f"this worker is not one of its replicas ({', '.join(rs.replicas)})"
    if me not in rs.isr:
        return Verdict.SET_ASIDE, f"a lagging replica; in sync: {', '.join(sorted(rs.isr))}"
    if rs.isr == {me}:
        return Verdict.REFUSE, "no other in-sync replica holds what this copy held"
    return Verdict.LEAVE_THEN_SET_ASIDE, f"in sync with {', '.join(sorted(rs.isr - {me}))}"


async def repair(replica: PartitionReplica, sets: ReplicaSets, me: str, now_ms: Callable[[], int]) -> None:
    """Repair the damaged copy of ``replica`` from the partition's other replicas, or leave it refused (see the
    module docstring).  Outages of DynamoDB propagate (the caller retries or gives up)."""
    partition = replica.partition
    for _ in range(LEAVE_ATTEMPTS):
        rs = await asyncio.to_thread(sets.get, partition)
        action, why = verdict(rs, me)
        if action is Verdict.REFUSE:
            replica.refuse(why)
            return
        if action is Verdict.LEAVE_THEN_SET_ASIDE:
            assert rs is not None
            try:
                await asyncio.to_thread(sets.leave_isr, partition, me, rs, now_ms())
            except NotInSync:
                pass  # a leader shrank the set meanwhile: a lagging follower already
            except CoordinationError as exc:
                log.info("partition %d: leaving the in-sync set was refused (%s); reading it again", partition, exc)
                continue
            else:
                log.warning("partition %d: left the in-sync set: its copy here is damaged", partition)
        await replica.set_aside()
        return
    replica.refuse("the in-sync set kept changing while this worker tried to leave it")


def quarantine(directory: Path, now: float) -> Path:
    """Rename ``directory`` to ``<directory>.damaged-<UTC time>`` (a free name beside it) and make the rename
    durable; returns the new path."""
    base = f"{directory.name}{QUARANTINE_MARK}{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))}"
    target = directory.with_name(base)
    n = 1
    while target.exists():
        n += 1
        target = directory.with_name(f"{base}-{n}")
    os.rename(directory, target)
    fsync_dir(directory.parent)
    return target


def mark_lost_copy(directory: Path) -> None:
    """Note in the new log directory that the copy before it was set aside, durably: until a leader has heard
    so (``Follower``), even across a restart."""
    fd = os.open(directory / LOST_COPY_MARK, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(directory)


def _utc(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
