"""A checkpoint as a base and deltas: each written costs what changed since the last, not the state's size.

About 100 bytes a message of a checkpoint are a few fixed-width arrays (the message table's columns and window, the
queues' rings); the rest of the state is small beside them.  A file of a chain holds the small state pickled whole,
with every big array (:data:`OUT_OF_BAND_MIN` or more) left out of the pickle as an out-of-band buffer, and a table
of those arrays: for each, its kind and length, and for each :data:`CHUNK` of its bytes a digest (CRC-32 and the
first 16 bytes of its SHA-256) and whether this file holds that chunk's bytes.

Chunks are kept by content.  A file holds the bytes of each chunk of its arrays that no earlier file of its chain
holds (by digest), once: an array that moved or was renumbered, or a column of zeros, costs nothing again.

- The **base** (``state.ckpt``) holds every distinct chunk of its arrays.
- A **delta** (``state.ckpt.<n>``, n = 1, 2, ...) holds the chunks no file before it holds. Sends and deletes
  change the rows they touch and the ends of the arrays, so a delta costs about what those rows hold (about
  130 bytes a message sent and deleted), beside a base of about 100 bytes a message held.
- Each file's head names its chain (a random id drawn with the base) and its position in it: a base written
  later, or a delta of another chain, is never mixed in.

Each chunk has two digests.  Chunks are told apart by the first 16 bytes of their BLAKE3, a cryptographic hash, so
that no chunk can be made to pass for another and let a delta leave out a chunk that did change.  A load checks
each chunk it reads against its XXH3-64 instead, a checksum for torn and damaged bytes only, and reads no chunk of
zeros at all (the arrays it fills start zeroed).  Measured here per GB hashed: XXH3 0.04 s, BLAKE3 0.14, CRC-32
0.15, SHA-256 0.52.  A delta hashes the whole state, so this is most of what one costs: at ten million messages
(about 1 GB of arrays) 0.67 s of CPU with CRC-32 and SHA-256, the second version's digests, which still load.

From version 4 the chunks of a file start at a page boundary, and each takes whole pages (a short chunk, the end
of an array, is padded with zeros): a chunk can be mapped where it lies, which a start that maps the checkpoint
instead of reading it needs (``docs/design/storage-at-scale.md``, step 9).  At most a page per array and one after
the table: nothing beside a state of megabytes.

Loading (:func:`read_chain`) takes the base and the deltas in order, up to the first that is missing, torn, or of
another chain; then (:func:`assemble`) each chunk of the last file's arrays is taken from a file that holds it,
straight into the array it belongs to: from version 4 mapped there (``mapped_chunks``; a load then costs about
what checking the chunks' XXH3 does, the file's pages shared with the page cache until written), before it read.
What the log holds after the last usable file is replayed as after any
checkpoint.  A writer (:func:`plan_file`) reads the chain's tables the same way, and writes a new base instead of
a delta once the deltas would hold more than half of the base (:data:`DELTAS_UP_TO`), or number
:data:`MAX_DELTAS`: a load never reads more than about one and a half times the state.
"""

from __future__ import annotations

import functools
import hashlib
import mmap
import os
import struct
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from typing import BinaryIO, NamedTuple

import blake3
import xxhash

from ferrymq.storage.engine import columns
from ferrymq.storage.log import mapped_chunks
from ferrymq.storage.log.segments import CHECKPOINT_NAME, discard_deltas, fsync_dir

MAGIC = b"FERRYCKP"
VERSION = 4
READABLE = (2, 3, 4)
"""Versions of a chain's files that load; a delta is only ever written after a file of :data:`VERSION`."""
CHUNK = 256 * 1024
"""Bytes of an array per digest: a delta holds whole chunks."""
PAGE = 4096
"""From version 4, a file's chunks start at this boundary and each takes a whole number of these, so that a chunk
can be mapped where it lies."""
OUT_OF_BAND_MIN = 64 * 1024
"""Arrays of fewer bytes stay in the pickle, written whole in every file."""
MAX_DELTAS = 64
DELTAS_UP_TO = 0.5
"""A new base is written instead of a delta that would take the deltas past this share of the base's size."""
BYTEARRAY = "Y"
"""The kind of a ``bytearray`` in the table (an ``array``'s kind is its typecode)."""

HEAD = struct.Struct(">8sHQQIQQQII")
"""A file's head, in the order of :class:`Head`."""


class Head(NamedTuple):
    magic: bytes
    version: int
    offset: int
    """The state is as of the record at this offset."""
    chain_id: int
    position: int
    """0: the base; n: the n-th delta after it."""
    pickle_length: int
    table_length: int
    chunk_bytes: int
    pickle_crc: int
    table_crc: int

_ENTRY = struct.Struct(">cQ")
"""A table entry's head: kind, length in bytes; its chunks' digests and presence follow."""
DIGEST = {2: 20, 3: 24, 4: 24}
"""A chunk's digests, by version: the CRC-32 (4 bytes) and the first 16 bytes of the SHA-256 (2); the XXH3-64 (8)
and the first 16 bytes of the BLAKE3 (3 and 4)."""


def padded(length: int, version: int) -> int:
    """The bytes ``length`` takes in a file of ``version``: whole pages from version 4."""
    return -(-length // PAGE) * PAGE if version >= 4 else length


class ChainUnusable(Exception):
    """A file of the chain is torn, damaged, or does not fit it."""


def delta_name(position: int) -> str:
    return f"{CHECKPOINT_NAME}.{position}"


def digest(chunk: memoryview | bytes, version: int) -> bytes:
    if version == 2:
        return zlib.crc32(chunk).to_bytes(4, "big") + hashlib.sha256(chunk).digest()[:16]
    return xxhash.xxh3_64_digest(chunk) + blake3.blake3(chunk).digest(16)


def intact(chunk: memoryview, found: bytes, version: int) -> bool:
    """Whether a chunk read back holds the bytes digested as ``found``, by its checksum alone."""
    if version == 2:
        return zlib.crc32(chunk) == int.from_bytes(found[:4], "big")
    return xxhash.xxh3_64_digest(chunk) == found[:8]


@functools.lru_cache(maxsize=8)
def zeros_digest(length: int, version: int) -> bytes:
    return digest(bytes(length), version)


@dataclass
class Entry:
    """One out-of-band array as a file's table records it."""

    kind: str
    length: int
    digests: list[bytes]
    present: bytearray
    """1 for each chunk whose bytes this file holds."""

    def chunk_bytes(self, j: int) -> int:
        return min(CHUNK, self.length - j * CHUNK)


@dataclass
class ChainFile:
    path: Path
    head: Head
    entries: list[Entry]

    @property
    def chain_id(self) -> int:
        return self.head.chain_id

    @property
    def position(self) -> int:
        return self.head.position

    @property
    def pickle_at(self) -> int:
        return HEAD.size

    @property
    def pickle_length(self) -> int:
        return self.head.pickle_length

    @property
    def table_end(self) -> int:
        return HEAD.size + self.head.pickle_length + self.head.table_length

    @property
    def chunks_at(self) -> int:
        return padded(self.table_end, self.head.version)

    @property
    def size(self) -> int:
        return self.chunks_at + self.head.chunk_bytes


@dataclass
class Chain:
    """The usable files of a partition's checkpoint, base first."""

    files: list[ChainFile] = field(default_factory=list)
    ended_at: str | None = None
    """Why the chain stops before every file present (a delta that is torn or of another chain), for the log."""

    @property
    def last(self) -> ChainFile:
        return self.files[-1]

    def bytes_of_deltas(self) -> int:
        return sum(f.size for f in self.files[1:])


def encode_table(entries: list[Entry]) -> bytes:
    parts = [len(entries).to_bytes(4, "big")]
    for entry in entries:
        parts.append(_ENTRY.pack(entry.kind.encode(), entry.length))
        parts.extend(entry.digests)
        parts.append(bytes(entry.present))
    return b"".join(parts)


def decode_table(data: bytes, version: int = VERSION) -> list[Entry]:
    size = DIGEST[version]
    view = memoryview(data)
    (count,) = struct.unpack_from(">I", view, 0)
    at = 4
    entries = []
    for _ in range(count):
        kind, length = _ENTRY.unpack_from(view, at)
        at += _ENTRY.size
        chunks = -(-length // CHUNK)
        digests = [bytes(view[at + size * j: at + size * (j + 1)]) for j in range(chunks)]
        at += size * chunks
        present = bytearray(view[at: at + chunks])
        at += chunks
        if len(present) != chunks or any(p > 1 for p in present):
            raise ValueError("a table entry runs past the table")
        entries.append(Entry(kind.decode("ascii"), length, digests, present))
    if at != len(view):
        raise ValueError("bytes after the table's last entry")
    return entries


def _read_file(path: Path, *, chain_id: int | None, position: int | None) -> ChainFile:
    """The head and table of one file of a chain, checked (not its pickle nor its chunks); ``None``: of any chain,
    at any position."""
    try:
        with open(path, "rb") as f:
            raw = f.read(HEAD.size)
            if len(raw) < HEAD.size:
                raise ChainUnusable(f"{path}: {len(raw)} bytes, shorter than its head")
            head = Head._make(HEAD.unpack(raw))
            if head.magic != MAGIC or head.version not in READABLE:
                raise ChainUnusable(f"{path}: not a checkpoint of this version")
            if (position is not None and head.position != position) or (
                chain_id is not None and head.chain_id != chain_id
            ):
                raise ChainUnusable(f"{path}: of another chain")
            found = ChainFile(path, head, [])
            # The lengths the head gives are checked against the file before anything is read by them.
            size = os.fstat(f.fileno()).st_size
            if found.size != size:
                raise ChainUnusable(f"{path}: torn or damaged ({size} bytes, its head says {found.size})")
            f.seek(HEAD.size + head.pickle_length)
            table = f.read(head.table_length)
    except OSError as exc:
        raise ChainUnusable(f"{path}: {exc}") from None
    if len(table) != head.table_length or zlib.crc32(table) != head.table_crc:
        raise ChainUnusable(f"{path}: torn or damaged (its table)")
    try:
        found.entries = decode_table(table, head.version)
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        raise ChainUnusable(f"{path}: torn or damaged ({exc})") from None
    return found


def read_chain(directory: Path) -> Chain | None:
    """The base in ``directory`` and the deltas that follow it (None: no base); raises :class:`ChainUnusable`
    when the base itself is."""
    path = directory / CHECKPOINT_NAME
    if not path.exists():
        return None
    base = _read_file(path, chain_id=None, position=0)
    chain = Chain([base])
    for position in range(1, MAX_DELTAS + 1):
        path = directory / delta_name(position)
        if not path.exists():
            break
        try:
            delta = _read_file(path, chain_id=base.chain_id, position=position)
            if delta.head.version != base.head.version:
                raise ChainUnusable(f"{path}: of another version than its base")
            chain.files.append(delta)
        except ChainUnusable as exc:
            chain.ended_at = str(exc)
            break
    return chain


def plan_file(
    chain: Chain | None, buffers: list[memoryview], kinds: list[str], repeated: int
) -> tuple[int, int, list[Entry]]:
    """``(chain id, position, table)`` of the file to write for ``buffers``: a delta of ``chain`` holding the
    chunks no file of it holds, or a new base when there is no chain or the delta would make it too long.
    ``repeated``: the bytes every file holds whole (its head and pickled state)."""
    entries = []
    for view, kind in zip(buffers, kinds, strict=True):
        digests = [digest(view[at: at + CHUNK], VERSION) for at in range(0, len(view), CHUNK)]
        entries.append(Entry(kind, len(view), digests, bytearray(len(digests))))
    if chain is not None and len(chain.files) <= MAX_DELTAS and chain.last.head.version == VERSION:
        size = padded(repeated + len(encode_table(entries)), VERSION) + _mark_new(entries, set(stored_chunks(chain)))
        if chain.bytes_of_deltas() + size <= chain.files[0].size * DELTAS_UP_TO:
            return chain.last.chain_id, len(chain.files), entries
    _mark_new(entries, set())
    return int.from_bytes(os.urandom(8), "big"), 0, entries


def _mark_new(entries: list[Entry], stored: set[bytes]) -> int:
    """Mark present each chunk whose bytes are not in ``stored`` yet (once, where it first comes: equal chunks,
    such as those of a column of zeros, are written once); returns the bytes they take in the file."""
    added = 0
    for entry in entries:
        for j, found in enumerate(entry.digests):
            if found in stored:
                entry.present[j] = 0
            else:
                entry.present[j] = 1
                stored.add(found)
                added += padded(entry.chunk_bytes(j), VERSION)
    return added


def stored_chunks(chain: Chain) -> dict[bytes, tuple[int, int, int]]:
    """Every chunk the chain's files hold, by digest: ``(file, offset in it, length)``."""
    found: dict[bytes, tuple[int, int, int]] = {}
    for k, chain_file in enumerate(chain.files):
        for i, j, at in _chunks_of(chain_file):
            entry = chain_file.entries[i]
            found[entry.digests[j]] = (k, at, entry.chunk_bytes(j))
    return found


def write_chunks(out: BinaryIO, at: int, buffers: list[memoryview], entries: list[Entry]) -> int:
    """Write the chunks ``entries`` mark present after the table, which ends at file position ``at``, each at a page
    boundary; returns the bytes written from the first chunk on, padding included (the head's ``chunk_bytes``)."""
    out.write(bytes(padded(at, VERSION) - at))
    written = 0
    for view, entry in zip(buffers, entries, strict=True):
        for j, present in enumerate(entry.present):
            if present:
                chunk = view[j * CHUNK: (j + 1) * CHUNK]
                written += out.write(chunk)
                written += out.write(bytes(padded(len(chunk), VERSION) - len(chunk)))
    return written


def publish(directory: Path, tmp_name: str) -> ChainFile:
    """Put the file written as ``tmp_name`` in place, durably, and return it: a base replaces the checkpoint and
    ends the deltas of the chain before it; a delta must follow the chain now on disk (raises
    :class:`ChainUnusable` if not)."""
    tmp = _read_file(directory / tmp_name, chain_id=None, position=None)
    if tmp.position == 0:
        os.replace(directory / tmp_name, directory / CHECKPOINT_NAME)
        fsync_dir(directory)
        discard_deltas(directory)
        return tmp
    chain = read_chain(directory)
    if chain is None or chain.last.chain_id != tmp.chain_id or len(chain.files) != tmp.position:
        raise ChainUnusable(f"{directory / tmp_name}: does not follow the checkpoint now in place")
    # Deltas past a damaged one (where the chain now ends) belong to states this one replaces: a load must not
    # take them as following it.
    discard_deltas(directory, after=tmp.position - 1)
    os.replace(directory / tmp_name, directory / delta_name(tmp.position))
    fsync_dir(directory)
    return tmp


def new_buffer(entry: Entry) -> memoryview:
    """Zeroed bytes (a reservation: ``engine.columns``) of ``entry``'s length, for its chunks to be read into. A
    message table's column keeps them as they are; an array is copied out of them."""
    kind = "B" if entry.kind == BYTEARRAY else entry.kind
    if kind not in columns.ITEM_BYTES:
        raise ValueError(f"an array of kind {entry.kind!r}")
    if entry.length % columns.ITEM_BYTES[kind]:
        raise ValueError(f"{entry.length} bytes is not a whole number of {entry.kind!r} items")
    return columns.loaded(kind, entry.length)[:entry.length]


def assemble(chain: Chain) -> list[memoryview]:
    """The arrays of the state the chain's last file makes, each chunk read from a file holding its bytes (by
    digest) and checked against its checksum; raises :class:`ChainUnusable` on a chunk that is missing or not
    what it should be.  Chunks of zeros are not read: the arrays start zeroed."""
    last = chain.last.entries
    version = chain.last.head.version
    if sum(entry.length for entry in last) > os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"):
        # Reserving them would cost nothing yet (``engine.columns``): a table whose checksums hold may still name
        # arrays beyond this machine (equal chunks, a column of zeros, are stored once), no state a worker wrote.
        raise MemoryError("arrays larger than memory")
    buffers = [new_buffer(entry) for entry in last]
    stored = stored_chunks(chain)
    reads: list[_Read] = []
    for i, entry in enumerate(last):
        for j, found in enumerate(entry.digests):
            if found == zeros_digest(entry.chunk_bytes(j), version):
                continue
            where = stored.get(found)
            if where is None or where[2] != entry.chunk_bytes(j):
                raise ChainUnusable(f"{chain.last.path}: a chunk of its arrays is in no file of the chain")
            k, at, length = where
            reads.append(_Read(k, at, i, j * CHUNK, length, found))
    # From version 4 each chunk lies on pages of its own: mapped, not read (``mapped_chunks``). Each chunk's pages
    # must be its own in memory too (not where tests make chunks smaller than a page), and on Linux only: the copy
    # that follows moves pages with ``mremap``.
    mappable = version >= 4 and CHUNK % mmap.PAGESIZE == 0 and sys.platform == "linux"
    # File by file, in the order the chunks lie in each.
    reads.sort(key=lambda read: (read.file, read.at))
    for k, in_file in groupby(reads, key=attrgetter("file")):
        chain_file = chain.files[k]
        with open(chain_file.path, "rb", buffering=0) as f:
            ordered = list(in_file)
            runs = _runs(ordered) if mappable else [[read] for read in ordered]
            # A mapping past the file's end would fault when read: the file's size is checked first.
            size = os.fstat(f.fileno()).st_size
            for run in runs:
                first, final = run[0], run[-1]
                span = final.memory_at + padded(final.length, version) - first.memory_at
                mapped = False
                if mappable and first.at + span <= size:
                    try:
                        mapped_chunks.map_file(buffers[first.array], first.memory_at, f.fileno(), first.at, span)
                        mapped = True
                    except (OSError, ValueError):
                        pass  # a file system that cannot map, or pages larger than the file's: read as before
                for read in run:
                    target = buffers[read.array][read.memory_at: read.memory_at + read.length]
                    if not mapped and os.preadv(f.fileno(), [target], read.at) != read.length:
                        raise ChainUnusable(f"{chain_file.path}: a chunk at byte {read.at} is torn")
                    if not intact(target, read.digest, version):
                        raise ChainUnusable(f"{chain_file.path}: a chunk at byte {read.at} is torn or damaged")
    return buffers


class _Read(NamedTuple):
    file: int
    at: int
    array: int
    memory_at: int
    length: int
    digest: bytes


def _runs(reads: list[_Read]) -> list[list[_Read]]:
    """``reads`` (of one file, in file order) as runs of chunks that lie one after the other both in the file and
    in one array, each mapped at once."""
    runs: list[list[_Read]] = []
    for read in reads:
        if runs:
            last = runs[-1][-1]
            if (read.array == last.array and last.length == CHUNK and read.at == last.at + CHUNK
                    and read.memory_at == last.memory_at + CHUNK):
                runs[-1].append(read)
                continue
        runs.append([read])
    return runs


def _chunks_of(chain_file: ChainFile) -> Iterator[tuple[int, int, int]]:
    """``(array, chunk, file offset)`` of each chunk the file holds, in file order."""
    at, version = chain_file.chunks_at, chain_file.head.version
    for i, entry in enumerate(chain_file.entries):
        for j, present in enumerate(entry.present):
            if present:
                yield i, j, at
                at += padded(entry.chunk_bytes(j), version)
