"""The first pass of compaction's fold: what the segments to fold remove (``ferrymq.storage.engine.fold``).

A base that holds a state (compaction's, or one installed from a leader: its header names the offset the state is
as of) is passed over: it holds live state only (RESTORED and the queues' metadata), nothing a later record removes
was sent in it, and at a large backlog it is most of the bytes.  The first segment of a log never compacted is a
base too, holding no state but records, and is read.  Of the other segments' records only those
the pass reads anything from are decoded: a payload is a msgpack array whose first item, the kind, is a small
integer, so its second byte tells the kind without decoding the rest.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ferrymq.storage.engine.fold import NOTED_KINDS, Removals
from ferrymq.storage.engine.records import SENT
from ferrymq.storage.log.reading import SealedSegments, decode, read_head, read_header
from ferrymq.storage.log.segments import segment_path

_FIXARRAY = range(0x90, 0xA0)
"""msgpack's first byte of an array of up to 15 items: every record's."""


def removals_in(directory: Path, indexes: list[int], cancelled: threading.Event | None = None) -> Removals | None:
    """What the records of sealed segments ``indexes`` (consecutive, from the log's first on) remove; None once
    ``cancelled`` is set (what was found so far would not say which queues to replay in full)."""
    removals = Removals()
    if indexes:
        first = segment_path(directory, indexes[0])
        header = read_header(first, read_head(first))
        if header.is_base and header.snapshot_offset > 0:
            indexes = indexes[1:]
    note, noted = removals.note, NOTED_KINDS
    for n, (_, frame, path) in enumerate(SealedSegments(directory, indexes).engine_frames()):
        if cancelled is not None and n % 4096 == 0 and cancelled.is_set():
            return None
        payload = frame.payload
        # The first SENT is read too: where the removals worth noting start.
        if len(payload) > 1 and payload[0] in _FIXARRAY and payload[1] not in noted and (
            payload[1] != SENT or removals.seqs is not None
        ):
            continue
        note(decode(frame, path))
    return removals
