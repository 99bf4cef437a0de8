"""A partition's state written down, so that the next start replays only the log after it.

Replaying a log decodes and applies every record since its base: about 6 s of CPU per million messages. A worker
that stops cleanly (SIGTERM, a rolling restart) writes its partition's state as of the last record, the
checkpoint, and each compaction writes the state its new base holds (:func:`checkpoint_of_base`); the next start
loads it and applies only the records after that offset. The log is still walked whole (its frames' checksums,
the epoch history, a torn tail), but not decoded or applied.

The checkpoint is a cache of the log, never a second source of truth:

- it names every segment the log had (index, inode, size): it is used only while each of those files is still
  there, the same file and no shorter (appends after it are the tail replayed);
- whatever rewrites segments (compaction, truncation, a state copy installed, salvage) deletes it just before;
- a checkpoint that is missing, torn, of another version or no longer matching is named in the log and the
  whole log is replayed, as without one.

Files: ``state.ckpt`` in the partition's directory and the deltas after it, ``state.ckpt.<n>``
(:mod:`.checkpoint_chain`): each a head, the state pickled with its big arrays left out, the arrays' table, and
the chunks of them that changed. Loading goes through an unpickler that builds only the engine's own classes and
arrays, so a file put there by anyone else cannot run code. Checkpoints of the first version (one file, the state
pickled whole) still load.
"""

from __future__ import annotations

import copyreg
import io
import logging
import os
import pickle
import struct
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ferrymq.storage.engine import columns
from ferrymq.storage.engine.fifo_groups import Groups
from ferrymq.storage.engine.state import PartitionState
from ferrymq.storage.engine.table import COLUMNS, MessageTable
from ferrymq.storage.log import checkpoint_chain as chain_files
from ferrymq.storage.log.bodies import place
from ferrymq.storage.log.checkpoint_chain import (
    BYTEARRAY,
    HEAD,
    MAGIC,
    READABLE,
    Chain,
    ChainFile,
    ChainUnusable,
    assemble,
    encode_table,
    plan_file,
    read_chain,
    write_chunks,
)
from ferrymq.storage.log.checkpoint_chain import publish as publish_file
from ferrymq.storage.log.segments import CHECKPOINT_NAME, SegmentInfo, crc_of, segment_path

if TYPE_CHECKING:
    from ferrymq.storage.log.compaction import Placement

log = logging.getLogger(__name__)

FILE_NAME = CHECKPOINT_NAME
TMP_NAME = "state.ckpt.tmp"
_HEAD_V1 = struct.Struct(">8sHQQI")
"""The first version's head: magic, version, offset, payload length, payload CRC-32."""

_ALLOWED = {
    (__name__, "_restored"),
    (__name__, "_column"),
    ("array", "_array_reconstructor"),
    ("array", "array"),
    ("collections", "OrderedDict"),
    ("collections", "deque"),
    # Plain types: system attributes are shared by their values' types as well (``table.Interner``).
    *(("builtins", name) for name in ("bool", "bytearray", "bytes", "dict", "float", "frozenset", "int", "list",
                                      "set", "str", "tuple")),
}
_ENGINE = "ferrymq.storage.engine."


class CheckpointUnusable(Exception):
    """The file is torn, damaged, of another version, or holds something other than a partition's state."""


@dataclass
class Checkpoint:
    offset: int
    """The state is as of the record at this offset: every record up to it is applied."""
    segments: list[tuple[int, int, int]]
    """``(index, inode, size)`` of each segment of the log when it was written."""
    files: dict[int, int]
    """The body store's file numbers (``ferrymq.storage.log.bodies``) -> the segment index each stands for."""
    state: PartitionState
    unplaced: list[tuple[int, list[int]]] = field(default_factory=list)
    """``(offset, message seqs)`` of records not yet durable when it was taken (a checkpoint taken while
    serving): their messages' rows are placed when recovery walks past those records, and a log that no longer
    holds them all (a crash lost them) makes the checkpoint unusable."""
    extents: list[tuple[int, int, int, int, int, int, int]] = field(default_factory=list)
    """``(index, size, flags, version, first offset, end offset, CRC-32 of its first size bytes)`` of each
    segment, its size the durable one: recovery checks a segment's CRC-32 instead of walking its frames again
    (empty: it walks every segment)."""
    history: list[tuple[int, int]] = field(default_factory=list)
    """The log's epoch history as of ``extents``."""
    last_epoch: int = 0
    """The epoch of the log's last record as of ``extents``."""
    deltas: int = 0
    """How many delta files were loaded after the base."""

    def known(self) -> dict[int, tuple[SegmentInfo, int]]:
        """The segments ``extents`` names, by index, each with its CRC-32."""
        return {index: (SegmentInfo(index, size, flags, version, first, end), crc)
                for index, size, flags, version, first, end, crc in self.extents}

    def matches(self, directory: Path) -> bool:
        """Whether every segment it names is still there, the same file and no shorter."""
        return segments_unchanged(directory, self.segments)


def segments_unchanged(directory: Path, segments: list[tuple[int, int, int]]) -> bool:
    """Whether every segment ``(index, inode, size)`` is still there, the same file and no shorter."""
    try:
        now = segment_files(directory, [index for index, _, _ in segments])
    except FileNotFoundError:
        return False
    return all(
        inode == inode_now and size_now >= size
        for (_, inode, size), (_, inode_now, size_now) in zip(segments, now, strict=True)
    )


def fill_crcs(directory: Path, checkpoint: Checkpoint) -> None:
    """Compute the CRC-32 of each extent that has none yet (its bytes up to its recorded size); a file shorter
    than recorded leaves the checkpoint without extents (recovery then walks every segment)."""
    for i, (index, size, flags, version, first, end, crc) in enumerate(checkpoint.extents):
        if crc is None:
            found = crc_of(segment_path(directory, index), size)
            if found is None:
                checkpoint.extents = []
                return
            checkpoint.extents[i] = (index, size, flags, version, first, end, found)


def write_checkpoint(
    directory: Path, checkpoint: Checkpoint, *, tmp_name: str = TMP_NAME, publish: bool = True, delta: bool = True
) -> int:
    """Write ``checkpoint`` durably; returns the bytes written.  With ``delta``, it is written as a delta of the
    checkpoint in place when that pays (:mod:`.checkpoint_chain`), else as a new base.  Unless ``publish``, it
    is left synced as ``tmp_name`` for :func:`publish_checkpoint` to put in place."""
    found: tuple[Any, ...] = (checkpoint.offset, checkpoint.segments, checkpoint.files, checkpoint.state)
    if checkpoint.unplaced or checkpoint.extents:
        found = (*found, checkpoint.unplaced)
    if checkpoint.extents:
        found = (*found, checkpoint.extents, checkpoint.history, checkpoint.last_epoch)
    chain: Chain | None = None
    if delta:
        try:
            chain = read_chain(directory)
        except ChainUnusable as exc:
            log.info("%s: a new base, as the checkpoint in place is unusable (%s)", directory, exc)
    table = checkpoint.state.table
    with open(directory / tmp_name, "wb") as f:
        # Pickled straight to the file, its length and CRC-32 counted on the way and put in the head last: the
        # state (about 1 GB at ten million messages) is never held whole in memory a second time.
        f.write(bytes(HEAD.size))
        payload = _CountedWrites(f)
        pickler = _Pickler(payload)
        # The body store holds open files: the table is written without it, and given a new one when loaded.
        bodies, table.bodies = table.bodies, None
        try:
            pickler.dump(found)
        finally:
            table.bodies = bodies
        views = [memoryview(big).cast("B") for big in pickler.big]
        chain_id, position, entries = plan_file(chain, views, pickler.kinds, HEAD.size + payload.written)
        encoded = encode_table(entries)
        f.write(encoded)
        table_end = HEAD.size + payload.written + len(encoded)
        chunk_bytes = write_chunks(f, table_end, views, entries)
        del views
        f.seek(0)
        f.write(HEAD.pack(MAGIC, chain_files.VERSION, checkpoint.offset, chain_id, position, payload.written,
                          len(encoded), chunk_bytes, payload.crc, zlib.crc32(encoded)))
        f.flush()
        os.fsync(f.fileno())
    if publish:
        publish_checkpoint(directory, tmp_name)
    return chain_files.padded(table_end, chain_files.VERSION) + chunk_bytes


def publish_checkpoint(directory: Path, tmp_name: str) -> ChainFile:
    """Put the checkpoint file written as ``tmp_name`` in place, durably, and return it.  Raises
    :class:`CheckpointUnusable` for a delta that no longer follows the checkpoint in place."""
    try:
        return publish_file(directory, tmp_name)
    except ChainUnusable as exc:
        raise CheckpointUnusable(str(exc)) from None


def read_checkpoint(directory: Path) -> Checkpoint | None:
    """The checkpoint in ``directory``, None if there is none; raises :class:`CheckpointUnusable`."""
    path = directory / FILE_NAME
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD.size)
    except FileNotFoundError:
        return None
    if len(head) < 10:
        raise CheckpointUnusable(f"{path}: {len(head)} bytes, shorter than its head")
    magic, version = struct.unpack_from(">8sH", head)
    if magic != MAGIC:
        raise CheckpointUnusable(f"{path}: not a FerryMQ checkpoint")
    if version == 1:
        return _checkpoint_of(path, _read_first_version(path))
    if version not in READABLE:
        readable = ", ".join(map(str, (1, *READABLE)))
        raise CheckpointUnusable(f"{path}: checkpoint version {version}, this worker reads {readable}")
    try:
        chain = read_chain(directory)
        if chain is None:
            return None
        if chain.ended_at is not None:
            log.warning("%s: the checkpoint ends at the file before (%s)", directory, chain.ended_at)
        # The last file's small state must be whole; a delta whose pickle is damaged is passed over for the one
        # before it, whose state is older but as good (the log after it is replayed).
        while not _pickle_intact(chain.last):
            log.warning("%s: torn or damaged (its pickled state); the checkpoint ends at the file before",
                        chain.last.path)
            chain.files.pop()
            if not chain.files:
                raise ChainUnusable(f"{path}: torn or damaged (its pickled state)")
        buffers = assemble(chain)
    except (ChainUnusable, ValueError, OSError) as exc:
        raise CheckpointUnusable(str(exc)) from None
    except MemoryError:
        # A table whose checksums hold may still name arrays beyond this machine (equal chunks, a column of zeros,
        # are stored once): it is no state this worker wrote.
        raise CheckpointUnusable(f"{path}: names arrays larger than memory") from None
    last = chain.last
    with open(last.path, "rb") as f:
        f.seek(last.pickle_at)
        found = _unpickled(last.path, _CheckedPayload(f, last.pickle_length), last.head.pickle_crc, buffers)
    return _checkpoint_of(last.path, (last.head.offset, found), deltas=len(chain.files) - 1)


def _pickle_intact(chain_file: ChainFile) -> bool:
    with open(chain_file.path, "rb") as f:
        f.seek(chain_file.pickle_at)
        return _CheckedPayload(f, chain_file.pickle_length).drained_intact(chain_file.head.pickle_crc)


def _read_first_version(path: Path) -> tuple[int, Any]:
    """``(offset, what was pickled)`` of a checkpoint of the first version: one file, the state pickled whole."""
    with open(path, "rb") as f:
        head = f.read(_HEAD_V1.size)
        if len(head) < _HEAD_V1.size:
            raise CheckpointUnusable(f"{path}: {len(head)} bytes, shorter than its head")
        _, _, offset, length, crc = _HEAD_V1.unpack(head)
        payload = _CheckedPayload(f, length)
        found = _unpickled(path, payload, crc, None, rest=f)
    return offset, found


def _unpickled(
    path: Path, payload: _CheckedPayload, crc: int, buffers: list[Any] | None, rest: io.BufferedReader | None = None
) -> Any:
    """Unpickle ``payload`` as it is read, its CRC-32 counted on the way: it is never held whole beside the state
    it becomes.  A torn or damaged payload is named as such, whatever the unpickler made of it."""
    try:
        found = _Unpickler(payload, buffers=buffers).load()
        failure: Exception | None = None
    except Exception as exc:
        failure = exc
    if not payload.drained_intact(crc) or (rest is not None and rest.read(1)):
        raise CheckpointUnusable(
            f"{path}: torn or damaged ({payload.read_bytes} of {payload.length} bytes, or a bad checksum)"
        )
    if failure is not None:
        raise CheckpointUnusable(f"{path}: unreadable: {failure}")
    return found


def _checkpoint_of(path: Path, loaded: tuple[int, Any], deltas: int = 0) -> Checkpoint:
    offset, found = loaded
    try:
        stored_offset, segments, files, state, *rest = found
        unplaced = [(int(at), list(seqs)) for at, seqs in (rest[0] if rest else [])]
        extents = [tuple(int(n) for n in extent) for extent in (rest[1] if len(rest) > 1 else [])]
        history = [(int(epoch), int(first)) for epoch, first in (rest[2] if len(rest) > 2 else [])]
        last_epoch = int(rest[3]) if len(rest) > 3 else 0
    except Exception as exc:
        raise CheckpointUnusable(f"{path}: unreadable: {exc}") from None
    if (
        stored_offset != offset
        or not isinstance(state, PartitionState)
        or len(rest) not in (0, 1, 4)
        or any(len(extent) != 7 for extent in extents)
    ):
        raise CheckpointUnusable(f"{path}: does not hold a partition's state")
    for queue in state.queues.values():
        queue.after_load()
    return Checkpoint(
        offset, [tuple(s) for s in segments], dict(files), state, unplaced, extents, history,  # type: ignore[arg-type]
        last_epoch, deltas,
    )


BASE_FILE = 1
"""The file number a compaction's checkpoint gives its base (the only file its rows point into)."""


def checkpoint_of_base(
    directory: Path,
    state: PartitionState,
    base: SegmentInfo,
    placed: list[Placement],
    keep_queues: frozenset[str] | None,
) -> int | None:
    """Write the state a compaction folded, as a checkpoint as of its new base, with the bodies left in the base;
    returns its size, or None when a message of it is not in the base (then nothing is written).

    The state is the fold's own, used by no one after: it is changed here, in compaction's thread."""
    if keep_queues is not None:
        # The base leaves out queues the worker no longer has: so does the state it stands for.
        for queue_id in [q for q in state.queues if q not in keep_queues]:
            state.queues.pop(queue_id).clear()
    table = state.table
    table.drop_bodies()
    found = sum(len(place(table, BASE_FILE, *placement)) for placement in placed)
    if found != table.live:
        log.warning("%s: %d of %d messages are not where the new base says; no checkpoint written with it",
                    directory, table.live - found, table.live)
        return None
    return write_checkpoint(
        directory,
        Checkpoint(base.first_offset - 1, segment_files(directory, [base.index]), {BASE_FILE: base.index}, state),
        delta=False,
    )


def segment_files(directory: Path, indexes: list[int]) -> list[tuple[int, int, int]]:
    """``(index, inode, size)`` of segments ``indexes`` as they are now."""
    found = []
    for index in indexes:
        st = os.stat(segment_path(directory, index))
        found.append((index, st.st_ino, st.st_size))
    return found


class _Pickler(pickle.Pickler):
    """Pickles a state with each big array out of band (:mod:`.checkpoint_chain`), in ``big``, and the others
    from their own buffers."""

    def __init__(self, file: _CountedWrites) -> None:
        super().__init__(file, protocol=5, buffer_callback=self._in_band)
        self.big: list[array | bytearray] = []
        self.kinds: list[str] = []

    def reducer_override(self, obj: Any) -> Any:
        # (``chain_files.OUT_OF_BAND_MIN`` read from its module: tests lower it to make chains of small states)
        if type(obj) is MessageTable:
            # A table's columns are reservations far longer than its rows (``engine.columns``): only the rows are
            # written, from where they lie, as arrays are.
            slots = obj.raw_state()
            for name, kind in COLUMNS:
                slots[name] = _Column(kind, obj.rows_of(name))
            return copyreg.__newobj__, (MessageTable,), (None, slots)
        if type(obj) is _Column:
            column = obj.data
            if column.nbytes >= chain_files.OUT_OF_BAND_MIN:
                self.big.append(column)
                self.kinds.append(obj.kind)
            return _column, (obj.kind, pickle.PickleBuffer(column))
        if type(obj) is Groups:
            # A FIFO group of many messages is a big array too: out of band, so that a delta holds only the chunks
            # of it that changed (the pickler itself writes every bytearray in band).
            least = chain_files.OUT_OF_BAND_MIN
            return copyreg.__newobj__, (Groups,), {
                name: _BigBytes(g) if len(g) >= least else g for name, g in obj.__getstate__().items()}
        if type(obj) is _BigBytes:
            self.big.append(obj.data)
            self.kinds.append(BYTEARRAY)
            return _restored, (BYTEARRAY, pickle.PickleBuffer(obj.data))
        if type(obj) is not array:
            return NotImplemented
        kind = obj.typecode
        # An array is written from its own buffer: its default reduction makes a bytes copy of it, which the
        # pickler's memo keeps until the end, so that every array was held twice while a checkpoint was written.
        if len(obj) * obj.itemsize >= chain_files.OUT_OF_BAND_MIN:
            self.big.append(obj)
            self.kinds.append(kind)
        return _restored, (kind, pickle.PickleBuffer(obj))

    @staticmethod
    def _in_band(buffer: pickle.PickleBuffer) -> bool:
        return buffer.raw().nbytes < chain_files.OUT_OF_BAND_MIN


class _Column:
    __slots__ = ("data", "kind")

    def __init__(self, kind: str, data: memoryview) -> None:
        self.kind, self.data = kind, data


class _BigBytes:
    __slots__ = ("data",)

    def __init__(self, data: bytearray) -> None:
        self.data = data


def _restored(kind: str, buffer: Any) -> array | bytearray:
    """An array or bytearray as a checkpoint holds it: out of band, the one its chunks were read into; in band,
    built from the bytes the pickle holds."""
    if kind == BYTEARRAY and isinstance(buffer, bytes | bytearray):
        return buffer if type(buffer) is bytearray else bytearray(buffer)
    if type(buffer) is array and buffer.typecode == kind:
        return buffer
    if type(buffer) is memoryview:
        # Out of band, read into a reservation (``checkpoint_chain.assemble``): an array is a copy of it.
        if kind == BYTEARRAY:
            return bytearray(buffer)
        restored = array(kind)
        restored.frombytes(buffer)
        return restored
    if not isinstance(buffer, bytes | bytearray):
        raise pickle.UnpicklingError(f"an array of {type(buffer).__name__}")
    return array(kind, buffer)


def _column(kind: str, buffer: Any) -> memoryview:
    """A message table's column as a checkpoint holds it: out of band, the reservation its chunks were read into;
    in band, a new one holding the bytes the pickle holds."""
    if kind not in columns.ITEM_BYTES or not isinstance(buffer, bytes | bytearray | memoryview):
        raise pickle.UnpicklingError(f"a column of {kind!r} from {type(buffer).__name__}")
    data = memoryview(buffer)
    if data.nbytes % columns.ITEM_BYTES[kind]:
        raise pickle.UnpicklingError(f"{data.nbytes} bytes is not a whole number of {kind!r} items")
    return columns.adopted(kind, data, data.nbytes // columns.ITEM_BYTES[kind])


class _CountedWrites:
    """A file the pickler writes a checkpoint's payload to, its length and CRC-32 counted as it goes."""

    def __init__(self, file: io.BufferedWriter) -> None:
        self._file = file
        self.written = 0
        self.crc = 0

    def write(self, data: Any) -> int:
        n = self._file.write(data)
        self.written += n
        self.crc = zlib.crc32(data, self.crc)
        return n


class _CheckedPayload:
    """A checkpoint's payload as the unpickler reads it from the file, its length and CRC-32 counted as it goes."""

    def __init__(self, file: io.BufferedReader, length: int) -> None:
        self._file = file
        self.length = length
        self._left = length
        self.read_bytes = 0
        self.crc = 0

    def _counted(self, data: bytes | memoryview) -> None:
        self.read_bytes += len(data)
        self._left -= len(data)
        self.crc = zlib.crc32(data, self.crc)

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(self._left if size < 0 else min(size, self._left))
        self._counted(data)
        return data

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")[: self._left]
        n = self._file.readinto(view) or 0
        self._counted(view[:n])
        return n

    def readline(self, size: int = -1) -> bytes:
        data = self._file.readline(self._left if size < 0 else min(size, self._left))
        self._counted(data)
        return data

    def drained_intact(self, crc: int) -> bool:
        """Read what the unpickler left; whether the whole payload was there, with CRC-32 ``crc``."""
        while self._left > 0 and self.read(1 << 20):
            pass
        return self.read_bytes == self.length and self.crc == crc


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module.startswith(_ENGINE):
            found = super().find_class(module, name)
            # Only the engine's own classes: a function, or a module a file of it imports, would hand a crafted
            # file the means to call anything.
            if isinstance(found, type) and found.__module__ == module:
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a partition's state")
