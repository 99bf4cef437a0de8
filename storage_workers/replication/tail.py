"""The leader's tail buffer: the frames it appended most recently, ``(epoch, offset, payload bytes)``, kept
in memory so that a follower that keeps up is served without a disk read and without waiting for the
leader's own fsync (leader and follower sync in parallel).

It is bounded by payload bytes: the oldest frames go first, the newest one always stays.  Offsets in it are
dense and ascending; what is older than its first frame is read from the log.
"""

from __future__ import annotations

from collections import deque

Frame = tuple[int, int, bytes]
"""``(epoch, offset, payload)``: one record as the leader's log stores it, sent as it is as a FETCH answer's
RECORD_FRAME (:mod:`ferrymq.rpc.shapes`)."""


class TailBuffer:
    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError(f"a tail buffer holds at least one byte: {max_bytes}")
        self.max_bytes = max_bytes
        self.bytes = 0
        """Payload bytes held."""
        self._frames: deque[Frame] = deque()

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def first_offset(self) -> int | None:
        """The offset of the oldest frame held; None when empty."""
        return self._frames[0][1] if self._frames else None

    @property
    def end_offset(self) -> int | None:
        """The offset after the newest frame held; None when empty."""
        return self._frames[-1][1] + 1 if self._frames else None

    def add(self, epoch: int, offset: int, payload: bytes) -> None:
        """Keep the frame just appended at ``offset``, dropping the oldest ones past ``max_bytes``."""
        if self._frames and offset != self._frames[-1][1] + 1:
            raise ValueError(f"frame at offset {offset} does not follow offset {self._frames[-1][1]}")
        self._frames.append((epoch, offset, payload))
        self.bytes += len(payload)
        while self.bytes > self.max_bytes and len(self._frames) > 1:
            self.bytes -= len(self._frames.popleft()[2])

    def covers(self, offset: int) -> bool:
        """Whether the frames from ``offset`` on are all here (``offset`` may be the end: nothing to send)."""
        first, end = self.first_offset, self.end_offset
        return first is not None and end is not None and first <= offset <= end

    def read(self, offset: int, max_bytes: int) -> list[Frame]:
        """The frames from ``offset`` on, at least one (when there is one) and about ``max_bytes`` of payload
        at most; ``offset`` must be covered."""
        if not self.covers(offset):
            raise LookupError(f"offset {offset} is not in the tail buffer ({self.first_offset}..{self.end_offset})")
        first = self.first_offset
        assert first is not None
        out: list[Frame] = []
        size = 0
        for index in range(offset - first, len(self._frames)):
            frame = self._frames[index]
            if out and size + len(frame[2]) > max_bytes:
                break
            out.append(frame)
            size += len(frame[2])
        return out
