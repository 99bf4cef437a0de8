"""Cutting a log after an offset, durably: what a rejoining follower does to a tail the leader does not have.

The segments after the one that holds the cut go first, the highest first, so a crash meanwhile leaves a
log that is only shorter at its end.  In the segment that holds it, the cut falls just before the first
record past the offset:

- at a batch boundary (the end of a commit frame, or of the header), the file is truncated there and synced;
- inside a batch, the batch's first records stay, and they need a commit of their own (a batch without one
  is a torn tail to recovery): the segment is written anew up to the cut, plus a commit frame for those
  records, into a ``.tmp`` renamed over it.  Truncating and then appending the commit in place would leave,
  after a crash between the two, committed records looking like a torn tail.

A version 1 segment has no batches: every frame boundary is a place to cut.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ferrymq.storage.log.epochs import EpochHistory
from ferrymq.storage.log.format import RECORD, Frame, encode_commit
from ferrymq.storage.log.reading import SegmentWalk, read_header
from ferrymq.storage.log.segments import (
    SegmentInfo,
    discard_checkpoint,
    fsync_dir,
    replace_segment,
    segment_path,
    truncate_file,
)


def cut_after(directory: Path, segments: list[SegmentInfo], offset: int) -> list[SegmentInfo]:
    """Cut every record after ``offset`` from the log whose segments are ``segments`` (all durable); returns
    the segments that remain.  ``offset`` must be at or after the record before the first segment's first."""
    holding = [i for i, s in enumerate(segments) if s.first_offset <= offset + 1]
    if not holding:
        raise ValueError(f"offset {offset} is before the log's first segment")
    discard_checkpoint(directory)
    at = holding[-1]
    later = segments[at + 1 :]
    for info in reversed(later):
        os.unlink(segment_path(directory, info.index))
    if later:
        fsync_dir(directory)
    info = segments[at]
    path = segment_path(directory, info.index)
    data = path.read_bytes()
    header = read_header(path, data)
    walk = SegmentWalk(path, data, header, info.first_offset, EpochHistory())
    cut: int | None = None
    batch_start = header.size
    kept: Frame | None = None
    for batch in walk.batches():
        for frame in batch:
            if frame.flags == RECORD and frame.offset > offset:
                cut = frame.start
                break
            kept = frame
        if cut is not None:
            break
        batch_start = walk.end
    size = info.size
    if cut is not None and cut == batch_start:
        truncate_file(path, cut)
        size = cut
    elif cut is not None:
        assert kept is not None
        commit = encode_commit(data[batch_start:cut], kept.epoch, kept.offset)
        size = replace_segment(directory, info.index, [memoryview(data)[:cut], commit])
    end = min(info.end_offset, offset + 1)
    return [*(dataclasses.replace(s) for s in segments[:at]), dataclasses.replace(info, size=size, end_offset=end)]
