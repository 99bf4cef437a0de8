"""A checkpoint written as a base and deltas (``ferrymq.storage.log.checkpoint_chain``): a delta holds the chunks
of the state's big arrays that changed, a load assembles each array from the latest file holding each chunk, and a
delta that is torn, damaged or of another chain ends the chain before it, named in the log."""

from __future__ import annotations

import gc
import hashlib
import logging
import mmap
import os
import pickle
import struct
import uuid
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.removed_ids import RemovedIds
from ferrymq.storage.log import checkpoint_chain, mapped_chunks
from ferrymq.storage.log.checkpoint import (
    FILE_NAME,
    Checkpoint,
    CheckpointUnusable,
    publish_checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from ferrymq.storage.log.checkpoint_chain import HEAD, MAGIC, VERSION, delta_name, encode_table, read_chain
from ferrymq.storage.log.segments import discard_checkpoint
from tests.fixtures.fifo_groups_v1 import STATE as FIFO_GROUPS_V1
from tests.fixtures.fifo_groups_v1.make_state import QUEUE as FIFO_QUEUE
from tests.support.engine_requests import RECEIPT_KEY, RETENTION, fifo_message, poll


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 4 KiB and every array of 1 KiB or more out of band: a few thousand messages make a chain."""
    monkeypatch.setattr(checkpoint_chain, "CHUNK", 4096)
    monkeypatch.setattr(checkpoint_chain, "OUT_OF_BAND_MIN", 1024)


@pytest.fixture
def any_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deltas written whatever their size beside the base's."""
    monkeypatch.setattr(checkpoint_chain, "DELTAS_UP_TO", 10**9)


def _message(body: str) -> list:
    """A message as the front end sends it (a UUID id, a hex MD5): the table keeps nothing of it beside its row."""
    return [str(uuid.uuid4()), body, {}, hashlib.md5(body.encode()).hexdigest(), None, 0, {}]


def _send(engine: Engine, tag: str, count: int) -> None:
    for start in range(0, count, 10):
        engine.send("q", [_message(f"{tag}{start + i}") for i in range(min(10, count - start))], RETENTION)
    engine.partition.table.drop_bodies()


def _engine(messages: int) -> Engine:
    engine = Engine(ManualClock(), RECEIPT_KEY)
    _send(engine, "m", messages)
    return engine


def _write(directory: Path, engine: Engine, offset: int, **kwargs: Any) -> int:
    return write_checkpoint(directory, Checkpoint(offset, [], {}, engine.partition), **kwargs)


def _chunk_bytes(directory: Path) -> list[int]:
    """Bytes of chunks each file of the chain holds, base first."""
    chain = read_chain(directory)
    assert chain is not None
    return [f.head.chunk_bytes for f in chain.files]


def _same(a: Engine, b: Engine) -> None:
    ta, tb = a.partition.table, b.partition.table
    for column in ("ids", "sent", "visible", "receives", "state", "owner"):
        assert ta.rows_of(column).tobytes() == tb.rows_of(column).tobytes(), column
    assert ta.window == tb.window
    assert ta.live == tb.live and ta.base == tb.base
    assert [list(q.order) for q in a.partition.queues.values()] == [list(q.order) for q in b.partition.queues.values()]


def test_a_delta_holds_only_the_chunks_that_changed_and_loads_to_the_same_state(
    tmp_path: Path, small_chunks: None, any_delta: None
) -> None:
    # given a base of 20,000 messages
    engine = _engine(20000)
    base_size = _write(tmp_path, engine, 1)
    # when nothing changes, a delta holds no chunk at all
    _write(tmp_path, engine, 2)
    # and when 20 messages are sent and 10 received and deleted, it holds a few chunks of each array
    _send(engine, "late", 20)
    received, _ = poll(engine, "q", 10)
    engine.delete("q", [m["receipt"] for m in received])
    delta_size = _write(tmp_path, engine, 3)
    chain = read_chain(tmp_path)
    assert chain is not None and [f.position for f in chain.files] == [0, 1, 2]
    _, unchanged, changed = _chunk_bytes(tmp_path)
    arrays = len(chain.last.entries)
    assert unchanged == 0
    # (at most the chunk where the new rows start and the one where they end, and the one of the deleted rows)
    assert 0 < changed <= 3 * arrays * checkpoint_chain.CHUNK < sum(e.length for e in chain.last.entries) / 4
    assert delta_size < base_size / 2
    # then the chain loads as the state it was written from
    found = read_checkpoint(tmp_path)
    assert found is not None and found.offset == 3 and found.deltas == 2
    _same(Engine(ManualClock(), RECEIPT_KEY, partition=found.state), engine)


def test_a_new_base_is_written_once_the_deltas_would_hold_half_of_it_and_the_old_deltas_go(
    tmp_path: Path, small_chunks: None
) -> None:
    engine = _engine(2000)
    _write(tmp_path, engine, 1)
    first = read_chain(tmp_path)
    assert first is not None
    offset = 1
    # when the state doubles, delta after delta
    while True:
        offset += 1
        _send(engine, f"x{offset}-", 200)
        _write(tmp_path, engine, offset)
        chain = read_chain(tmp_path)
        assert chain is not None
        if chain.files[0].chain_id != first.files[0].chain_id:
            break
        # the deltas never hold more than half of the base
        assert chain.bytes_of_deltas() <= chain.files[0].size // 2
    # then a new base replaced them, and no delta file is left
    assert len(chain.files) == 1 and not list(tmp_path.glob(f"{FILE_NAME}.*"))
    found = read_checkpoint(tmp_path)
    assert found is not None and found.offset == offset and found.deltas == 0
    _same(Engine(ManualClock(), RECEIPT_KEY, partition=found.state), engine)


def _chain_of_three(directory: Path) -> list[Engine]:
    """A base and two deltas, each a state of its own; returns the engines as of each (copies, by reloading)."""
    engine = _engine(3000)
    states = []
    for offset in (1, 2, 3):
        if offset > 1:
            _send(engine, f"y{offset}-", 30)
        _write(directory, engine, offset)
        found = read_checkpoint(directory)
        assert found is not None
        states.append(Engine(ManualClock(), RECEIPT_KEY, partition=found.state))
    assert found.deltas == 2
    return states


def _flip(path: Path, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("damage", ["table", "pickle", "missing", "other chain"])
def test_a_bad_last_delta_ends_the_chain_before_it_named_in_the_log(
    tmp_path: Path, small_chunks: None, any_delta: None, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    states = _chain_of_three(tmp_path)
    last = read_chain(tmp_path).last  # type: ignore[union-attr]
    if damage == "table":
        _flip(last.path, last.table_end - 3)
    elif damage == "pickle":
        _flip(last.path, last.pickle_at + last.pickle_length // 2)
    elif damage == "missing":
        last.path.unlink()
    else:
        data = bytearray(last.path.read_bytes())
        data[18:26] = os.urandom(8)
        last.path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        found = read_checkpoint(tmp_path)
    assert found is not None and found.offset == 2 and found.deltas == 1
    _same(Engine(ManualClock(), RECEIPT_KEY, partition=found.state), states[1])
    if damage != "missing":
        assert any(delta_name(2) in r.getMessage() and "file before" in r.getMessage() for r in caplog.records)


def test_a_damaged_chunk_makes_the_checkpoint_unusable(tmp_path: Path, small_chunks: None, any_delta: None) -> None:
    _chain_of_three(tmp_path)
    # (the base's first chunk: the deltas changed only the arrays' ends, so it is read from the base)
    base = read_chain(tmp_path).files[0]  # type: ignore[union-attr]
    _flip(base.path, base.chunks_at + 5)
    with pytest.raises(CheckpointUnusable, match="torn or damaged"):
        read_checkpoint(tmp_path)


def test_a_delta_written_where_the_chain_ended_early_replaces_the_deltas_after_it(
    tmp_path: Path, small_chunks: None, any_delta: None
) -> None:
    states = _chain_of_three(tmp_path)
    # given the first delta damaged: the chain ends at the base, and a stale second delta is still on disk
    first = read_chain(tmp_path).files[1]  # type: ignore[union-attr]
    _flip(first.path, first.table_end - 3)
    assert (tmp_path / delta_name(2)).exists()
    # when a state is written again, as the delta after the base
    engine = states[2]
    _send(engine, "z", 5)
    _write(tmp_path, engine, 9)
    # then it took the damaged delta's place, and the stale one after it, built on other bytes, is gone
    assert not (tmp_path / delta_name(2)).exists()
    found = read_checkpoint(tmp_path)
    assert found is not None and found.offset == 9 and found.deltas == 1
    _same(Engine(ManualClock(), RECEIPT_KEY, partition=found.state), engine)


def test_a_delta_that_no_longer_follows_the_checkpoint_in_place_is_not_published(
    tmp_path: Path, small_chunks: None, any_delta: None
) -> None:
    engine = _engine(2000)
    _write(tmp_path, engine, 1)
    _send(engine, "late", 1)
    _write(tmp_path, engine, 2, tmp_name="pending", publish=False)
    # when the checkpoint is discarded (a rewrite of the log) and another base written before it is put in place
    discard_checkpoint(tmp_path)
    _write(tmp_path, engine, 2)
    with pytest.raises(CheckpointUnusable, match="does not follow"):
        publish_checkpoint(tmp_path, "pending")
    assert not (tmp_path / delta_name(1)).exists()
    # and discarding a checkpoint takes its deltas with it
    _write(tmp_path, engine, 3)
    assert (tmp_path / delta_name(1)).exists()
    discard_checkpoint(tmp_path)
    assert not list(tmp_path.glob(f"{FILE_NAME}*"))


def test_a_crafted_chain_file_runs_no_code(tmp_path: Path, small_chunks: None) -> None:
    marker = tmp_path / "ran"

    class Exploit:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {marker}",))

    # given a base whose head, table and checksums are right, and whose pickle calls a function when loaded
    for payload in (
        pickle.dumps((1, [], {}, Exploit()), protocol=5),
        pickle.dumps((1, [], {}, pickle.PickleBuffer(bytearray(8))), protocol=5, buffer_callback=lambda _: False),
    ):
        table = encode_table([])
        head = HEAD.pack(MAGIC, VERSION, 1, 7, 0, len(payload), len(table), 0, zlib.crc32(payload),
                         zlib.crc32(table))
        (tmp_path / FILE_NAME).write_bytes(head + payload + table)
        with pytest.raises(CheckpointUnusable):
            read_checkpoint(tmp_path)
        assert not marker.exists()


def test_a_checkpoint_of_the_first_version_still_loads_and_the_next_one_is_a_new_base(tmp_path: Path) -> None:
    # given a checkpoint as the first version wrote it: one file, the state pickled whole after a head
    engine = _engine(3000)
    _first_version_file(tmp_path, 4, engine.partition)
    # when it is read, it is the state it was written from
    found = read_checkpoint(tmp_path)
    assert found is not None and found.offset == 4 and found.deltas == 0
    _same(Engine(ManualClock(), RECEIPT_KEY, partition=found.state), engine)
    # and the next checkpoint is a base of this version, not a delta of it
    _write(tmp_path, engine, 5)
    chain = read_chain(tmp_path)
    assert chain is not None and [f.position for f in chain.files] == [0] and chain.last.head.version == VERSION


@pytest.mark.parametrize("version", [2, 3])
def test_a_chain_of_an_earlier_version_still_loads_and_the_next_checkpoint_is_a_base_of_this_one(
    tmp_path: Path, small_chunks: None, any_delta: None, monkeypatch: pytest.MonkeyPatch, version: int
) -> None:
    # given a base and deltas as an earlier version wrote them (2: CRC-32 and SHA-256 digests; 3: chunks unaligned)
    with monkeypatch.context() as old:
        old.setattr(checkpoint_chain, "VERSION", version)
        states = _chain_of_three(tmp_path)
    chain = read_chain(tmp_path)
    assert chain is not None and {f.head.version for f in chain.files} == {version}
    assert len(chain.last.entries[0].digests[0]) == checkpoint_chain.DIGEST[version]
    # when it is read, it is the state it was written from
    found = read_checkpoint(tmp_path)
    assert found is not None and found.offset == 3 and found.deltas == 2
    _same(Engine(ManualClock(), RECEIPT_KEY, partition=found.state), states[2])
    # and the next checkpoint is a base of this version, not a delta of the old chain
    engine = states[2]
    _send(engine, "z", 5)
    _write(tmp_path, engine, 4)
    chain = read_chain(tmp_path)
    assert chain is not None and [(f.position, f.head.version) for f in chain.files] == [(0, VERSION)]
    assert not (tmp_path / delta_name(1)).exists()
    found = read_checkpoint(tmp_path)
    assert found is not None
    _same(Engine(ManualClock(), RECEIPT_KEY, partition=found.state), engine)


def test_a_delta_of_another_version_than_its_base_ends_the_chain(
    tmp_path: Path, small_chunks: None, any_delta: None, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a delta of the second version, kept aside
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    with monkeypatch.context() as old:
        old.setattr(checkpoint_chain, "VERSION", 2)
        _chain_of_three(tmp_path / "old")
    old_delta = bytearray((tmp_path / "old" / delta_name(1)).read_bytes())
    # when it is put after a base of this version, with the base's chain id
    states = _chain_of_three(tmp_path / "new")
    base = read_chain(tmp_path / "new").files[0]  # type: ignore[union-attr]
    old_delta[18:26] = base.chain_id.to_bytes(8, "big")
    (tmp_path / "new" / delta_name(2)).unlink()
    (tmp_path / "new" / delta_name(1)).write_bytes(bytes(old_delta))
    # then the chain ends at the base, named in the log
    with caplog.at_level(logging.WARNING):
        found = read_checkpoint(tmp_path / "new")
    assert found is not None and found.offset == 1 and found.deltas == 0
    _same(Engine(ManualClock(), RECEIPT_KEY, partition=found.state), states[0])
    assert any("another version" in r.getMessage() for r in caplog.records)


def test_a_load_reads_no_chunk_of_zeros(tmp_path: Path, small_chunks: None, any_delta: None) -> None:
    # given a chain whose arrays hold chunks of zeros (columns of messages never received), stored once
    engine = _chain_of_three(tmp_path)[2]
    chain = read_chain(tmp_path)
    assert chain is not None
    zeros = checkpoint_chain.zeros_digest(checkpoint_chain.CHUNK, VERSION)
    k, at, length = checkpoint_chain.stored_chunks(chain)[zeros]
    # when the stored chunk of zeros is damaged on disk
    _flip(chain.files[k].path, at + length // 2)
    # then a load still gives the state, its zeros never read from the file, while any other damaged chunk
    # is found (test_a_damaged_chunk_makes_the_checkpoint_unusable)
    found = read_checkpoint(tmp_path)
    assert found is not None
    _same(Engine(ManualClock(), RECEIPT_KEY, partition=found.state), engine)
    assert any(zeros in entry.digests for entry in chain.last.entries)


def test_a_head_or_table_naming_more_than_the_file_or_memory_holds_is_refused_without_reading_by_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = pickle.dumps((1, [], {}, None), protocol=5)
    table = encode_table([])
    # given heads whose lengths run past the file
    for pickle_length, table_length in ((len(payload), 2**62), (2**62, len(table))):
        head = HEAD.pack(MAGIC, VERSION, 1, 7, 0, pickle_length, table_length, 0, zlib.crc32(payload),
                         zlib.crc32(table))
        (tmp_path / FILE_NAME).write_bytes(head + payload + table)
        with pytest.raises(CheckpointUnusable, match="its head says"):
            read_checkpoint(tmp_path)
    # and a table whose checksum holds, naming a terabyte of zeros with one stored chunk (of 16 MiB here, so that
    # the table is 1.4 MB)
    monkeypatch.setattr(checkpoint_chain, "CHUNK", 16 << 20)
    zeros = bytes(checkpoint_chain.CHUNK)
    digest = checkpoint_chain.digest(memoryview(zeros), VERSION)
    chunks = (1 << 40) // checkpoint_chain.CHUNK
    stored = checkpoint_chain.Entry("B", checkpoint_chain.CHUNK, [digest], bytearray(b"\x01"))
    huge = checkpoint_chain.Entry("B", 1 << 40, [digest] * chunks, bytearray(chunks))
    table = encode_table([stored, huge])
    head = HEAD.pack(MAGIC, VERSION, 1, 7, 0, len(payload), len(table), len(zeros), zlib.crc32(payload),
                     zlib.crc32(table))
    front = head + payload + table
    front += bytes(checkpoint_chain.padded(len(front), VERSION) - len(front))
    (tmp_path / FILE_NAME).write_bytes(front + zeros)
    # then each is refused as unusable (the whole log is replayed), not read into memory by what it says
    with pytest.raises(CheckpointUnusable, match="larger than memory"):
        read_checkpoint(tmp_path)


def test_a_fifo_group_of_many_messages_is_a_big_array_of_the_chain_and_loads_whole(
    tmp_path: Path, small_chunks: None, any_delta: None
) -> None:
    # given a FIFO queue with one group of 3,000 messages (24 KB of sequence numbers: out of band, in the chain's
    # table, as any big array) and a small one
    engine = Engine(ManualClock(), RECEIPT_KEY)
    for start in range(0, 3000, 10):
        engine.store("q.fifo", [fifo_message("big", f"m{start + i}") for i in range(10)], RETENTION, fifo=True)
    engine.store("q.fifo", [fifo_message("small", "s")], RETENTION, fifo=True)
    _write(tmp_path, engine, 1)
    chain = read_chain(tmp_path)
    assert chain is not None
    assert [e.length for e in chain.last.entries if e.kind == checkpoint_chain.BYTEARRAY] == [24 + 8 * 3000]
    # when ten of the big group are received and deleted, and more sent, then a delta written
    received, _ = poll(engine, "q.fifo", 10)
    engine.delete("q.fifo", [m["receipt"] for m in received])
    engine.store("q.fifo", [fifo_message("big", f"late{i}") for i in range(5)], RETENTION, fifo=True)
    _write(tmp_path, engine, 2)
    # then the chain loads to the same groups, and the next receive takes the big group's next ten in order
    found = read_checkpoint(tmp_path)
    assert found is not None and found.deltas == 1
    loaded = Engine(ManualClock(), RECEIPT_KEY, partition=found.state)

    def groups(e: Engine) -> dict[str, list[int]]:
        q = e.partition.queues["q.fifo"]
        return {name: list(q.groups.seqs(name)) for name in q.groups.names()}

    assert groups(loaded) == groups(engine) and len(groups(engine)["big"]) >= 2995
    assert [m["body"] for m in poll(loaded, "q.fifo", 10)[0]] == [m["body"] for m in poll(engine, "q.fifo", 10)[0]]


def _first_version_file(directory: Path, offset: int, state: Any) -> None:
    """``state`` as the first version wrote a checkpoint: one file, the state pickled whole after a head."""
    payload = pickle.dumps((offset, [], {}, state), protocol=5)
    head = struct.pack(">8sHQQI", MAGIC, 1, offset, len(payload), zlib.crc32(payload))
    (directory / FILE_NAME).write_bytes(head + payload)


def test_fifo_groups_a_checkpoint_held_as_objects_load_through_the_checkpoint_reader(tmp_path: Path) -> None:
    # given a checkpoint of a state pickled while a FIFO queue's groups were objects (tests/fixtures/fifo_groups_v1)
    state = pickle.loads(FIFO_GROUPS_V1.read_bytes())
    _first_version_file(tmp_path, 7, state)
    # when it is read, with the reader that allows a partition's classes only
    found = read_checkpoint(tmp_path)
    # then its groups are bytearrays, holding what the objects held
    assert found is not None
    q = found.state.queues[FIFO_QUEUE]
    assert {name: (list(q.groups.seqs(name)), q.groups.in_flight(name)) for name in q.groups.names()} == {
        "a": ([1, 2, 3, 4, 5], 1), "b": ([6, 7, 8, 9, 10], 1), "c": ([11, 12, 13, 14, 15, 17, 18], 5)}


def test_fifo_groups_a_crafted_checkpoint_holds_make_it_unusable(tmp_path: Path) -> None:
    # given a checkpoint whose FIFO group claims more live messages than it has entries
    engine = Engine(ManualClock(), RECEIPT_KEY)
    engine.store("q.fifo", [fifo_message("g", "m")], RETENTION, fifo=True)
    groups = engine.partition.queues["q.fifo"].groups
    groups._by_name["g"][8:16] = (5).to_bytes(8, "little")
    _first_version_file(tmp_path, 3, engine.partition)
    # then it is refused as a whole, named, rather than a receive failing later
    with pytest.raises(CheckpointUnusable, match="malformed"):
        read_checkpoint(tmp_path)


def test_windows_a_checkpoint_holds_as_plain_dicts_load_as_ordered_windows_in_their_order(tmp_path: Path) -> None:
    # given a checkpoint written before a queue's windows were ordered dicts: plain ones, in removal order
    engine = _engine(300)
    while handles := [m["receipt"] for m in poll(engine, "q", 10)[0]]:
        engine.delete("q", handles)
    queue = engine.queues["q"]
    removed = list(queue.gone)
    assert len(removed) == 300
    queue.gone = dict(queue.gone)  # type: ignore[assignment]
    _write(tmp_path, engine, 9)
    # when it is loaded
    found = read_checkpoint(tmp_path)
    assert found is not None
    loaded = found.state.queues["q"]
    # then its windows are ordered again (removed ids in ordered chunks), in the order they were
    assert type(loaded.gone) is RemovedIds and type(loaded.recent) is OrderedDict
    assert list(loaded.gone) == removed
    # and forgetting past the horizon empties the window
    loaded.forget_gone(max(loaded.gone.values()) + 1)
    assert not loaded.gone


def test_every_chunk_lies_on_a_page_boundary_and_maps_to_the_bytes_it_loads_as(
    tmp_path: Path, small_chunks: None, any_delta: None
) -> None:
    # given a base and two deltas of this version, whose arrays end in chunks shorter than a page
    engine = _chain_of_three(tmp_path)[2]
    chain = read_chain(tmp_path)
    assert chain is not None
    found = read_checkpoint(tmp_path)
    assert found is not None
    loaded = {entry.digests[j]: (i, j) for i, entry in enumerate(chain.last.entries) for j in range(len(entry.digests))}
    arrays = checkpoint_chain.assemble(chain)
    # then each chunk any file holds starts on a page boundary, each file's size is whole pages, and a chunk mapped
    # where it lies (as a start will map it) holds the bytes of the array it belongs to
    for chain_file in chain.files:
        assert chain_file.path.stat().st_size % checkpoint_chain.PAGE == 0
    mapped = 0
    for found_digest, (k, at, length) in checkpoint_chain.stored_chunks(chain).items():
        assert at % checkpoint_chain.PAGE == 0
        if found_digest not in loaded:
            continue
        i, j = loaded[found_digest]
        start = j * checkpoint_chain.CHUNK
        with open(chain.files[k].path, "rb") as f, mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ,
                                                             offset=at) as m:
            assert m[:] == bytes(memoryview(arrays[i]).cast("B")[start: start + length])
        mapped += 1
    assert mapped > 10
    _same(Engine(ManualClock(), RECEIPT_KEY, partition=found.state), engine)


def mapped_files(directory: Path) -> set[str]:
    """Files of ``directory`` this process maps (``(deleted)`` once unlinked)."""
    found = set()
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith(str(directory)):
            found.add(fields[5])
    return found


def test_a_load_maps_its_chunks_and_the_state_outlives_the_files_and_their_copy_into_memory(
    tmp_path: Path, any_delta: None
) -> None:
    # given a base of 60,000 messages and a delta (chunks of 256 KiB: each column of 8 bytes a row is two of them)
    engine = _engine(60000)
    _write(tmp_path, engine, 1)
    _send(engine, "late", 20)
    received, _ = poll(engine, "q", 10)
    engine.delete("q", [m["receipt"] for m in received])
    _write(tmp_path, engine, 2)
    files = sorted(tmp_path.glob(f"{FILE_NAME}*"))
    digests = {path: hashlib.sha256(path.read_bytes()).digest() for path in files}
    # when it is loaded
    before = mapped_chunks.mapped_bytes()
    found = read_checkpoint(tmp_path)
    assert found is not None and found.deltas == 1
    # then its chunks are the files' pages, mapped where they belong, not read
    assert mapped_files(tmp_path) == {str(path) for path in files}
    loaded = Engine(ManualClock(), RECEIPT_KEY, partition=found.state)
    _same(loaded, engine)
    # and none of it is to be copied until the state is in use (a load and its replay may run off the loop)
    assert mapped_chunks.mapped_bytes() == before
    mapped_chunks.settle(found.state.table.column_views())
    assert mapped_chunks.mapped_bytes() - before >= 10 * checkpoint_chain.CHUNK
    # and rows written into them are the process's own: the files are as they were
    batches = [[_message(f"after{start + i}") for i in range(10)] for start in range(0, 30, 10)]
    for target in (engine, loaded):
        for batch in batches:
            target.send("q", batch, RETENTION)
        received, _ = poll(target, "q", 25)
        target.delete("q", [m["receipt"] for m in received])
    _same(loaded, engine)
    assert {path: hashlib.sha256(path.read_bytes()).digest() for path in files} == digests
    # and once the files are gone (a new base replaced them), the state is still whole
    for path in files:
        path.unlink()
    assert mapped_files(tmp_path) == {f"{path} (deleted)" for path in files}
    _same(loaded, engine)
    # and a copy pass, a step at a time, leaves nothing of them mapped, the state as it was
    while mapped_chunks.copy_mapped(checkpoint_chain.CHUNK):
        pass
    assert mapped_chunks.mapped_bytes() == 0 and not mapped_files(tmp_path)
    _same(loaded, engine)


def test_a_chunk_damaged_on_disk_is_refused_when_mapped(tmp_path: Path) -> None:
    engine = _engine(60000)
    _write(tmp_path, engine, 1)
    chain = read_chain(tmp_path)
    assert chain is not None
    # given one byte of a stored chunk flipped (the first chunk of the first out-of-band array)
    at = chain.last.chunks_at + 100
    with open(tmp_path / FILE_NAME, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0xFF]))
    # then the load refuses it, and leaves nothing mapped
    with pytest.raises(CheckpointUnusable, match="torn or damaged"):
        read_checkpoint(tmp_path)
    gc.collect()
    assert not mapped_files(tmp_path)
