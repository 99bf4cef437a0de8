"""The stand-in's write-ahead journal: one record per applied mutating request.

File layout (``journal.log``), records back to back, no header::

    +----------------+----------------+----------------------------------+
    | length: u32 BE | crc32: u32 BE  | payload: msgpack map (length B)  |
    +----------------+----------------+----------------------------------+

The CRC covers the payload. A crash can leave a torn last record; reading stops at the first record whose
length runs past the end of the file or whose CRC does not match, and :meth:`Journal.open` cuts the file
there so new records never follow garbage.

Every record carries a sequence number that grows by one per record and never restarts; a snapshot stores
the last sequence number it contains, so records the snapshot already holds are skipped on replay even
when a crash came between writing the snapshot and truncating the journal.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

import msgpack

_HEADER = struct.Struct(">II")


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One mutating request, with everything needed to send it through moto's WSGI app again.

    ``environ`` holds the request's CGI/WSGI string variables (method, paths, query, headers); ``at`` is the
    wall-clock time the request was applied, which replay hands to moto's clock.
    """

    seq: int
    at: float
    environ: dict[str, str]
    preserved_header_names: dict[str, str]
    body: bytes


def encode_entry(entry: JournalEntry) -> bytes:
    payload = msgpack.packb(
        {
            "seq": entry.seq,
            "at": entry.at,
            "environ": entry.environ,
            "names": entry.preserved_header_names,
            "body": entry.body,
        },
        use_bin_type=True,
    )
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def decode_entries(data: bytes) -> tuple[list[JournalEntry], int]:
    """The intact entries at the start of ``data`` and the length of the intact prefix."""
    entries: list[JournalEntry] = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        payload = data[start : start + length]
        if len(payload) < length or zlib.crc32(payload) != crc:
            break
        fields = msgpack.unpackb(payload, raw=False)
        entries.append(
            JournalEntry(
                seq=fields["seq"],
                at=fields["at"],
                environ=fields["environ"],
                preserved_header_names=fields["names"],
                body=fields["body"],
            )
        )
        offset = start + length
    return entries, offset


class Journal:
    """Append-only journal file with group commit.

    :meth:`append` is called with the caller's write lock held, so file order is apply order; :meth:`sync`
    is called after releasing it, and one ``fdatasync`` covers every record written before it started.
    """

    def __init__(self, path: Path, fd: int, size: int, last_seq: int) -> None:
        self.path = path
        self._fd = fd
        self._size = size
        self._written_seq = last_seq
        self._durable_seq = last_seq
        self._sync_lock = threading.Lock()

    @classmethod
    def open(cls, path: Path) -> tuple[Journal, list[JournalEntry]]:
        """Open (or create) the journal, cut a torn tail, and return it with the entries it holds."""
        data = path.read_bytes() if path.exists() else b""
        entries, intact = decode_entries(data)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        if intact < len(data):
            os.ftruncate(fd, intact)
            os.fsync(fd)
        last_seq = entries[-1].seq if entries else 0
        return cls(path, fd, intact, last_seq), entries

    @property
    def size(self) -> int:
        return self._size

    def append(self, entry: JournalEntry) -> None:
        """Write ``entry`` (not yet durable). Callers hold the stand-in's write lock."""
        frame = encode_entry(entry)
        view = memoryview(frame)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self._size += len(frame)
        self._written_seq = entry.seq

    def sync(self, seq: int) -> None:
        """Return once every record up to ``seq`` is on disk, sharing one fdatasync among concurrent callers."""
        with self._sync_lock:
            if self._durable_seq >= seq:
                return
            target = self._written_seq
            os.fdatasync(self._fd)
            self._durable_seq = max(self._durable_seq, target)

    def truncate(self, durable_through: int) -> None:
        """Drop every record: a snapshot holding state up to ``durable_through`` is already on disk."""
        os.ftruncate(self._fd, 0)
        os.fsync(self._fd)
        self._size = 0
        with self._sync_lock:
            self._durable_seq = max(self._durable_seq, durable_through)

    def close(self) -> None:
        os.close(self._fd)
