"""The message table's columns (``ferrymq.storage.engine.columns``): reservations that grow without moving, a
table that outgrows small ones keeps every row, an emptied table gives its pages back, and a table pickled whole
comes back as it was."""

from __future__ import annotations

import mmap
import pickle
import uuid
from typing import Any

import pytest

from ferrymq.storage.engine import columns
from ferrymq.storage.engine.table import COLUMNS, MessageTable


def _insert(table: MessageTable, seq: int) -> int:
    return table.insert(seq, 7, str(uuid.UUID(int=seq)), f"b{seq}", {}, f"{seq:032x}", None, {"SenderId": "A"},
                        seq, seq + 1, seq % 5, seq + 2, f"g{seq % 3}", None, 256 + seq, seq % 10, 1)


def _row(table: MessageTable, seq: int) -> tuple[Any, ...]:
    slot = table.slot(seq)
    return (table.sent[slot], table.visible[slot], table.first_receive[slot], table.receives[slot],
            table.size[slot], table.level[slot], table.group_of(slot), *table.fields(slot))


def test_a_column_is_a_reservation_far_longer_than_its_rows_that_grows_in_place() -> None:
    table = MessageTable()
    before = {name: columns.address(getattr(table, name)) for name, _ in COLUMNS}
    for seq in range(1, 5001):
        _insert(table, seq)
    # the columns never moved: rows are written into the room reserved at the start
    assert {name: columns.address(getattr(table, name)) for name, _ in COLUMNS} == before
    assert len(table.sent) == columns.RESERVED_ROWS and len(table.ids) == 16 * columns.RESERVED_ROWS
    assert table.rows_of("sent").tolist() == list(range(1, 5001))


def test_a_table_whose_reservations_are_small_moves_to_bigger_ones_and_keeps_every_row(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a table made when the kernel refused reservations above 64 KiB (as strict overcommit accounting
    # refuses large ones while memory is short)
    real = mmap.mmap

    def refusing(fileno: int, length: int, *args: Any, **kwargs: Any) -> mmap.mmap:
        if length > 64 * 1024:
            raise OSError(12, "Cannot allocate memory")
        return real(fileno, length, *args, **kwargs)

    monkeypatch.setattr(mmap, "mmap", refusing)
    monkeypatch.setattr(columns, "MIN_ROWS", 256)
    table = MessageTable()
    monkeypatch.setattr(mmap, "mmap", real)
    assert len(table.sent) < 10_000
    expected = {}
    # when it takes more rows than they hold, some of them freed and reused on the way
    for seq in range(1, 10_001):
        _insert(table, seq)
        if seq % 7 == 0:
            table.free(seq - 3, table.slot(seq - 3))
        expected[seq] = None
    # then every live row is as it went in (the table moved to reservations it was given: 4 times what it needed,
    # or the most the kernel gave)
    survivors = [seq for seq in expected if table.slot(seq) >= 0]
    assert table.live == len(survivors) == 10_000 - 10_000 // 7
    assert len(table.sent) >= 10_000
    fresh = MessageTable()
    for seq in survivors:
        _insert(fresh, seq)
    assert [_row(table, seq) for seq in survivors] == [_row(fresh, seq) for seq in survivors]


def test_a_reservation_the_kernel_refuses_whole_is_asked_for_again_smaller(monkeypatch: pytest.MonkeyPatch) -> None:
    real = mmap.mmap
    asked: list[int] = []

    def refusing(fileno: int, length: int, *args: Any, **kwargs: Any) -> mmap.mmap:
        asked.append(length)
        if length > 1 << 20:
            raise OSError(12, "Cannot allocate memory")
        return real(fileno, length, *args, **kwargs)

    monkeypatch.setattr(mmap, "mmap", refusing)
    column = columns.reserve("q")
    assert column.nbytes == 1 << 20
    assert asked == [columns.RESERVED_ROWS * 8 >> k for k in range(len(asked))]
    # and below the fewest rows asked for, the refusal is the caller's
    monkeypatch.setattr(columns, "MIN_ROWS", 1 << 20)
    with pytest.raises(OSError):
        columns.reserve("q")


def test_an_emptied_table_gives_its_rows_pages_back_and_starts_again_from_the_first_row(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(columns, "RELEASE_BYTES", 0)
    table = MessageTable()
    for seq in range(1, 2001):
        _insert(table, seq)
    for seq in range(1, 2001):
        table.free(seq, table.slot(seq))
    # the pages were given back: they read as zeros, as untouched ones do
    assert table.live == 0 and table.rows_of("sent").nbytes == 0
    assert not any(table.sent[:2000]) and not any(table.ids[:16 * 2000])
    # and the table is used again from its first row
    assert _insert(table, 5000) == 0 and _row(table, 5000)[0] == 5000


def test_a_table_pickled_whole_comes_back_with_its_rows_in_columns_of_its_own() -> None:
    table = MessageTable()
    for seq in range(1, 301):
        _insert(table, seq)
    for seq in range(1, 301, 4):
        table.free(seq, table.slot(seq))
    again = pickle.loads(pickle.dumps(table, protocol=5))
    assert again.live == table.live and len(again.sent) == columns.RESERVED_ROWS
    assert [_row(again, seq) for seq in range(2, 301) if seq % 4 != 1] == [
        _row(table, seq) for seq in range(2, 301) if seq % 4 != 1]
    # and it takes new rows as the first did: into the rows freed, then after its last
    assert _insert(again, 400) == _insert(table, 400)
    assert _row(again, 400) == _row(table, 400)
