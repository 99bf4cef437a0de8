"""A total-queue checker in the style of Jepsen's: what was sent, with what outcome, against what came out.

Every send attempt is recorded with its outcome:

- **acknowledged**: the service answered success, so the message must come out;
- **unknown**: a 5xx or a timeout, so it may or may not come out.

Every received body is recorded (each receipt, duplicates included), and every acknowledged delete. The
verdict (:meth:`QueueHistory.verdict`) is:

- **lost**: acknowledged, never received;
- **unexpected**: received, never attempted;
- **duplicated**: received more than once (allowed for a standard queue, where SQS delivers at least once);
- **resurrected**: received again after its delete was acknowledged, the delete naming the receipt handle of
  its latest receipt. A receive whose outcome is unknown (:meth:`QueueHistory.receive_unknown`) may have
  received the message again unseen, superseding that handle: SQS then answers the delete with success and
  deletes nothing, so a delete acknowledged after such a receive proves nothing;
- **out of order** (FIFO): a group whose first receipts do not follow the order its sends were attempted in.

Unavailability is measured per fault: the longest time without an acknowledged send from the fault until
sending stopped.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Verdict:
    attempted: int
    acknowledged: int
    unknown: int
    unknown_receives: int
    received: int
    lost: list[str]
    unexpected: list[str]
    duplicated: int
    resurrected: list[str]
    out_of_order: list[str]
    unavailable_seconds: list[float]

    def summary(self) -> str:
        return (
            f"attempted {self.attempted}, acknowledged {self.acknowledged}, unknown {self.unknown}, "
            f"receives unknown {self.unknown_receives}, "
            f"received {self.received}, lost {len(self.lost)}, unexpected {len(self.unexpected)}, "
            f"duplicated {self.duplicated}, resurrected {len(self.resurrected)}, "
            f"out of order {len(self.out_of_order)}, unavailable after faults "
            f"{', '.join(f'{s:.2f} s' for s in self.unavailable_seconds) or '-'}"
        )


@dataclass
class QueueHistory:
    fifo: bool = False
    attempts: dict[str, str] = field(default_factory=dict)
    """body -> "ok" | "unknown"."""
    send_order: dict[str, list[str]] = field(default_factory=dict)
    """FIFO: group -> bodies in the order their sends were attempted."""
    receipts: list[str] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    resurrected: list[str] = field(default_factory=list)
    acked_at: list[float] = field(default_factory=list)
    faults: list[float] = field(default_factory=list)
    stopped_at: float | None = None
    unknown_receives: int = 0
    _received_after: dict[str, int] = field(default_factory=dict)
    """body -> ``unknown_receives`` when it was last received."""
    story: dict[str, list[str]] = field(default_factory=dict)
    """body -> what happened to it, in order (receipts with the message's id and receive count, acknowledged
    deletes), to tell a failure's cause: a second copy (another id) or a delete that did not hold (same id)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attempt(self, body: str, group: str | None = None) -> None:
        with self._lock:
            self.attempts[body] = "unknown"
            if group is not None:
                self.send_order.setdefault(group, []).append(body)

    def acknowledged(self, body: str) -> None:
        with self._lock:
            self.attempts[body] = "ok"
            self.acked_at.append(time.monotonic())

    def received(self, body: str, detail: str = "") -> None:
        with self._lock:
            self.story.setdefault(body, []).append(f"{time.monotonic():.3f} received {detail}")
            if body in self.deleted:
                self.resurrected.append(body)
            self.receipts.append(body)
            self._received_after[body] = self.unknown_receives

    def receive_unknown(self) -> None:
        """A receive failed with a 5xx or a timeout: it may have received messages nobody saw."""
        with self._lock:
            self.unknown_receives += 1

    def delete_acknowledged(self, body: str) -> None:
        with self._lock:
            self.story.setdefault(body, []).append(f"{time.monotonic():.3f} delete acknowledged")
            if self._received_after.get(body) == self.unknown_receives:
                self.deleted.add(body)

    def sending_stopped(self) -> None:
        with self._lock:
            self.stopped_at = time.monotonic()

    def fault(self) -> None:
        with self._lock:
            self.faults.append(time.monotonic())

    def verdict(self) -> Verdict:
        with self._lock:
            counts = Counter(self.receipts)
            acknowledged = [b for b, outcome in self.attempts.items() if outcome == "ok"]
            out_of_order: list[str] = []
            if self.fifo:
                first_seen: dict[str, int] = {}
                for index, body in enumerate(self.receipts):
                    first_seen.setdefault(body, index)
                for group, bodies in self.send_order.items():
                    positions = [first_seen[b] for b in bodies if b in first_seen]
                    if positions != sorted(positions):
                        out_of_order.append(group)
            return Verdict(
                attempted=len(self.attempts),
                acknowledged=len(acknowledged),
                unknown=len(self.attempts) - len(acknowledged),
                unknown_receives=self.unknown_receives,
                received=len(counts),
                lost=sorted(b for b in acknowledged if b not in counts),
                unexpected=sorted(b for b in counts if b not in self.attempts),
                duplicated=sum(n - 1 for n in counts.values()),
                resurrected=list(self.resurrected),
                out_of_order=out_of_order,
                unavailable_seconds=[self._unavailable_after(t) for t in self.faults],
            )

    def _unavailable_after(self, fault: float) -> float:
        """The longest stretch without an acknowledged send from ``fault`` until sending stopped (inf when
        none came after it)."""
        later = sorted(t for t in self.acked_at if t >= fault)
        if not later:
            return float("inf")
        end = self.stopped_at if self.stopped_at is not None else later[-1]
        points = [fault, *later, max(end, later[-1])]
        return max(b - a for a, b in itertools.pairwise(points))
