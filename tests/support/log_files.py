"""Log files built and damaged byte by byte, for the log tests: version 1 logs as a worker before format
version 2 left them, the frames of a segment, and the surgery a crash or a bad disk does."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

from ferrymq.storage.engine.records import Record
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.format import (
    BASE,
    COMMIT,
    Frame,
    decode_header,
    encode_frame_v1,
    encode_header_v1,
    scan_frames,
)
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.segments import segment_path
from ferrymq.storage.log.writer import LogWriter


def write_v1_log(directory: Path, segments: Iterable[Iterable[Record]]) -> None:
    """A version 1 log: one segment per item of ``segments``, numbered from 1, the first a base."""
    directory.mkdir(parents=True, exist_ok=True)
    for index, records in enumerate(segments, start=1):
        frames = b"".join(encode_frame_v1(codec.encode(r)) for r in records)
        segment_path(directory, index).write_bytes(encode_header_v1(BASE if index == 1 else 0) + frames)


def write_batches(directory: Path, batches: list[list[Record]], epoch: int = 0, **writer_args: object) -> None:
    """Append ``batches`` to the log in ``directory``, each one group-commit batch, synced before the next."""

    async def run() -> None:
        writer = LogWriter(directory, recover(directory, lambda _: None), **writer_args)  # type: ignore[arg-type]
        for batch in batches:
            for record in batch:
                writer.append(record, epoch)
            await writer.flush()
        await writer.close()

    asyncio.run(run())


def frames_of(path: Path) -> list[Frame]:
    """Every intact frame of segment ``path`` from its header on, up to the first bad one."""
    data = path.read_bytes()
    header = decode_header(data)
    return list(scan_frames(data, header.size, header.version))


def commits_of(path: Path) -> list[Frame]:
    return [f for f in frames_of(path) if f.flags == COMMIT]


def flip(path: Path, at: int) -> None:
    """Flip every bit of byte ``at`` of ``path`` (a bad sector, say)."""
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def zero(path: Path, start: int, end: int) -> None:
    """Zero bytes ``start..end`` of ``path``: a page that never reached the disk."""
    data = bytearray(path.read_bytes())
    data[start:end] = bytes(end - start)
    path.write_bytes(bytes(data))
