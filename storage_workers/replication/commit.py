"""The leader's commit tracker for one partition: which offsets the replica set holds durably enough to
acknowledge, and the replies waiting for that.

Each follower's FETCH carries its durable log end, recorded by :meth:`CommitTracker.ack`; the leader's own
is its log writer's ``durable_offset``.  The high watermark is the smallest of these over the in-sync set
(``replication_rules.high_watermark``) and never moves back; while the in-sync set is too small for the
acknowledgement mode (``replication_rules.acks_satisfied``) it does not move at all.  A record at offset
``o`` is committed once ``o`` is below the high watermark.

With ``acks=leader`` committed means durable in the leader's log: waiters are handed to the log writer as
they are, so a single-copy partition replies exactly as it did before replication.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable
from typing import Any, Protocol

from ferrymq.replication_rules import Acks, acks_satisfied, high_watermark


class DurableLog(Protocol):
    """What the tracker needs of the leader's log writer."""

    @property
    def durable_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    def when_offset_durable(self, offset: int, callback: Callable[[Any], None], arg: Any) -> None: ...


class CommitTracker:
    def __init__(
        self,
        me: str,
        log: DurableLog,
        *,
        acks: Acks = Acks.LEADER,
        replicas: Iterable[str] = (),
        isr: Collection[str] | None = None,
    ) -> None:
        """``me`` is the leader's worker id; ``replicas`` the replica set (``me`` alone when empty); ``isr``
        the in-sync set as given (every replica when None), which always holds the leader."""
        self.me = me
        self.acks = Acks(acks)
        self.replicas = tuple(replicas) or (me,)
        if len(self.replicas) == 1:
            # A replica set of one: committed is durable in the leader's log, whatever the mode says.
            self.acks = Acks.LEADER
        self.isr = frozenset(self.replicas if isr is None else isr)
        if me not in self.replicas or me not in self.isr:
            raise ValueError(f"the leader {me} belongs to its replica set and in-sync set")
        if not self.isr <= set(self.replicas):
            raise ValueError(f"in-sync set {sorted(self.isr)} is not within the replica set {self.replicas}")
        self._log = log
        self.acked: dict[str, int] = {}
        """Each follower's last acknowledged durable log end."""
        self._hw = 0
        self._rules_changed()
        self._waiters: deque[tuple[int, Callable[[Any], None], Any]] = deque()

    @property
    def high_watermark(self) -> int:
        """The offset below which every record is committed."""
        if self.acks is Acks.LEADER:
            return self._log.durable_offset
        return self._hw

    def ack(self, replica: str, durable_offset: int) -> None:
        """Record that follower ``replica`` has everything below ``durable_offset`` durable."""
        if replica == self.me or replica not in self.replicas:
            raise ValueError(f"{replica} is not a follower in the replica set {self.replicas}")
        if durable_offset > self._log.end_offset:
            raise ValueError(
                f"{replica} acknowledges offset {durable_offset}, past the leader's log end {self._log.end_offset}"
            )
        if durable_offset > self.acked.get(replica, 0):
            self.acked[replica] = durable_offset
            self.advance()

    def set_isr(self, isr: Collection[str]) -> None:
        """Take the in-sync set as the coordination item now holds it (after a shrink or an expansion the
        item accepted); the high watermark is recomputed over it."""
        isr = frozenset(isr)
        if self.me not in isr or not isr <= set(self.replicas):
            raise ValueError(f"in-sync set {sorted(isr)} must hold {self.me} and only replicas of {self.replicas}")
        self.isr = isr
        self._rules_changed()
        self.advance()

    def set_replicas(self, replicas: Iterable[str]) -> None:
        """Take a new replica set (the manager replaced a replica): members that left it leave the in-sync
        set too (the item's reassignment dropped them, so they cannot be elected), new ones join it only
        once caught up."""
        replicas = tuple(replicas)
        if self.me not in replicas:
            raise ValueError(f"the leader {self.me} belongs to its replica set {replicas}")
        self.replicas = replicas
        self.isr = self.isr & set(replicas)
        self.acked = {r: offset for r, offset in self.acked.items() if r in replicas}
        self._rules_changed()
        self.advance()

    def abandon(self) -> list[Any]:
        """Forget the replies waiting for the high watermark (the leader steps down: whether their records
        survive is up to the next leader); returns their ``arg``s, oldest first."""
        waiters, self._waiters = self._waiters, deque()
        return [arg for _, _, arg in waiters]

    def _rules_changed(self) -> None:
        """The mode, the replica set or the in-sync set changed: what :meth:`advance` asks of each call is
        worked out again here, once, rather than on every acknowledgement and fsync."""
        self._counting = self.acks is not Acks.LEADER and acks_satisfied(self.acks, self.replicas, self.isr)
        """Whether the high watermark moves at all (``acks_satisfied``)."""

    def advance(self) -> None:
        """Recompute the high watermark (after an acknowledgement or the leader's own fsync) and run the
        waiters now committed, in order."""
        if not self._counting:
            return
        hw = high_watermark(self.isr, {**self.acked, self.me: self._log.durable_offset})
        if hw <= self._hw:
            return
        self._hw = hw
        waiters = self._waiters
        while waiters and waiters[0][0] < hw:
            _, callback, arg = waiters.popleft()
            callback(arg)

    def when_committed(self, offset: int, callback: Callable[[Any], None], arg: Any) -> None:
        """Call ``callback(arg)`` once the record at ``offset`` and all before it are committed (now, if they
        are).  Waiters are run in the order they came, so ``offset`` must not go below an earlier one's."""
        if self.acks is Acks.LEADER:
            self._log.when_offset_durable(offset, callback, arg)
        elif offset < self._hw:
            callback(arg)
        else:
            self._waiters.append((offset, callback, arg))

    @property
    def waiting(self) -> int:
        """Replies held for the high watermark (``acks=leader``: held by the log writer instead)."""
        return len(self._waiters)
