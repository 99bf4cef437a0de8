"""The epoch history of a log: for each leader epoch that appended records, the offset of its first record
(Kafka's leader-epoch checkpoint).

A rejoining follower asks the leader about its own last epoch; the leader answers from its history
(:meth:`EpochHistory.end_offset_for`, the rule of :func:`ferrymq.replication_rules.end_offset_for_epoch`) and
the follower applies :func:`ferrymq.replication_rules.truncation_point`, which may ask again about an older
epoch before it names the offset to cut at.

Recovery derives the history from the frames' epochs; compaction, which drops those frames, keeps the history
up to its snapshot in an ``EPOCHS`` frame of the base segment, whose payload is a msgpack array of
``[epoch, first offset]`` pairs, by increasing epoch and offset.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import msgpack

from ferrymq.replication_rules import EpochEnd, EpochStart, end_offset_for_epoch


class EpochRegressed(ValueError):
    """A record's epoch is lower than that of a record before it."""


class EpochHistory:
    def __init__(self, entries: Iterable[tuple[int, int]] = ()) -> None:
        self._epochs: list[int] = []
        self._firsts: list[int] = []
        for epoch, first in entries:
            self.observe(epoch, first)

    @property
    def entries(self) -> list[tuple[int, int]]:
        """``(epoch, first offset)`` pairs, oldest first."""
        return list(zip(self._epochs, self._firsts, strict=True))

    @property
    def latest(self) -> int | None:
        """The epoch of the last record, None for a log without records."""
        return self._epochs[-1] if self._epochs else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EpochHistory) and self.entries == other.entries

    def __repr__(self) -> str:
        return f"EpochHistory({self.entries!r})"

    def copy(self) -> EpochHistory:
        return EpochHistory(self.entries)

    def observe(self, epoch: int, offset: int) -> None:
        """Take note of a record at ``offset`` appended under ``epoch`` (records come in offset order)."""
        if self._epochs:
            if epoch == self._epochs[-1]:
                return
            if epoch < self._epochs[-1]:
                raise EpochRegressed(
                    f"offset {offset} has epoch {epoch}, lower than epoch {self._epochs[-1]} before it"
                )
            if offset <= self._firsts[-1]:
                raise EpochRegressed(f"epoch {epoch} starts at offset {offset}, before epoch {self._epochs[-1]}")
        self._epochs.append(epoch)
        self._firsts.append(offset)

    def end_offset_for(self, epoch: int, log_end: int) -> EpochEnd | None:
        """This log's answer to a follower asking about ``epoch`` (``log_end``: the offset after the last
        record); None when the history starts above it, so only a snapshot can bring the follower along."""
        return end_offset_for_epoch(self.as_rules(), log_end, epoch)

    def as_rules(self) -> list[EpochStart]:
        """The history as :mod:`ferrymq.replication_rules` takes it."""
        return [EpochStart(e, f) for e, f in zip(self._epochs, self._firsts, strict=True)]

    def truncate_after(self, offset: int) -> None:
        """Forget the epochs whose first record lies after ``offset``."""
        at = bisect.bisect_right(self._firsts, offset)
        del self._epochs[at:], self._firsts[at:]

    def upto(self, offset: int) -> EpochHistory:
        """The history of the records up to ``offset``."""
        kept = self.copy()
        kept.truncate_after(offset)
        return kept

    def encode(self) -> bytes:
        return msgpack.packb([[e, f] for e, f in self.entries])

    @classmethod
    def decode(cls, payload: bytes | memoryview) -> EpochHistory:
        entries = msgpack.unpackb(payload)
        if not isinstance(entries, list) or not all(
            isinstance(e, list) and len(e) == 2 and all(isinstance(v, int) and v >= 0 for v in e) for e in entries
        ):
            raise ValueError("not an epoch history")
        return cls((e, f) for e, f in entries)


def readable(payload: bytes | memoryview) -> bool:
    """Whether ``payload`` is an epoch history (how a resync scan tells an ``EPOCHS`` frame from lookalike bytes)."""
    try:
        EpochHistory.decode(payload)
    except Exception:
        return False
    return True
