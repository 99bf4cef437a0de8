"""Base segments: a log that starts from a snapshot of the state as of an offset instead of from nothing.

Compaction writes one over the sealed segments it folds (:mod:`.compaction`); a replica too far behind its
leader to catch up from the leader's log installs one made of the leader's state (:func:`install_snapshot`).
A follower may also take its leader's first segment as it is (:mod:`.base_copy`, :func:`adopt_base`).
Either way the header names the offset and epoch the state is as of and starts the log at the offset after
it, an ``EPOCHS`` frame keeps the epoch history up to there, and the state follows as ``SNAPSHOT`` frames in
committed batches.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from itertools import chain
from pathlib import Path

from ferrymq.storage.log.epochs import EpochHistory
from ferrymq.storage.log.format import (
    BASE,
    EPOCHS,
    FRAME_OVERHEAD,
    SNAPSHOT,
    committed,
    encode_frame,
    encode_header,
)
from ferrymq.storage.log.segments import (
    TMP_SUFFIX,
    discard_checkpoint,
    fsync_dir,
    list_segments,
    replace_segment,
    segment_path,
)


def write_base(
    directory: Path,
    index: int,
    payloads: Iterable[bytes],
    offset: int,
    epoch: int,
    history: EpochHistory,
    positions: list[int] | None = None,
) -> int:
    """Write segment ``index`` as a base holding ``payloads`` (encoded records) as the state as of ``offset``
    (appended in ``epoch``), atomically over whatever segment ``index`` was; returns its size.  ``positions``,
    when given, receives where each payload lies in the file, in order (where message bodies are read back)."""
    frames = chain(
        [encode_frame(EPOCHS, epoch, offset, history.upto(offset).encode())],
        (encode_frame(SNAPSHOT, epoch, offset, payload) for payload in payloads),
    )
    header = encode_header(BASE, offset + 1, offset, epoch)
    starts: list[int] | None = [] if positions is not None else None
    size = replace_segment(directory, index, chain([header], committed(frames, epoch, offset, starts=starts)))
    if positions is not None and starts is not None:
        # The first frame is the epoch history's; the payloads' frames follow, each payload past its frame head.
        positions.extend(len(header) + start + FRAME_OVERHEAD for start in starts[1:])
    return size


def install_snapshot(
    directory: Path, payloads: Iterable[bytes], offset: int, epoch: int, history: EpochHistory
) -> None:
    """Make the log in ``directory`` (closed) the state ``payloads`` as of ``offset`` and nothing else."""
    _supersede(directory, lambda index: write_base(directory, index, payloads, offset, epoch, history))


def adopt_base(directory: Path, staged: Path) -> None:
    """Make the log in ``directory`` (closed) the copy of a leader's first segment at ``staged`` (complete,
    checked and synced: :class:`~.base_copy.BaseReceiver`) and nothing else."""

    def move(index: int) -> None:
        # The checkpoint is of the log being replaced: it goes before the new base can be found.
        discard_checkpoint(directory)
        os.replace(staged, segment_path(directory, index))

    _supersede(directory, move)


def _supersede(directory: Path, place: Callable[[int], object]) -> None:
    """Have ``place`` put a new base at an index above every existing segment, then delete those.

    A crash in between leaves either the old log or a log whose base supersedes it (recovery starts at the
    last base and deletes what precedes it)."""
    existing = list_segments(directory)
    place((existing[-1] + 1) if existing else 1)
    fsync_dir(directory)
    for old in existing:
        segment_path(directory, old).unlink()
    for leftover in directory.glob(f"*{TMP_SUFFIX}"):
        os.unlink(leftover)
    fsync_dir(directory)
