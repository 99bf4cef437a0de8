"""The stand-in's journal file: appends survive reopening, a torn tail is cut, truncation empties it."""

from __future__ import annotations

from pathlib import Path

from ferrymq.infra.standin.journal import Journal, JournalEntry


def _entry(seq: int) -> JournalEntry:
    return JournalEntry(seq=seq, at=1.5, environ={"REQUEST_METHOD": "PUT"}, preserved_header_names={},
                        body=b"x" * seq)


def test_appended_records_are_read_back_after_reopening(tmp_path: Path) -> None:
    # given a journal with three synced records
    journal, existing = Journal.open(tmp_path / "journal.log")
    assert existing == []
    for seq in (1, 2, 3):
        journal.append(_entry(seq))
    journal.sync(3)
    journal.close()
    # when reopened, then the records come back in order
    reopened, entries = Journal.open(tmp_path / "journal.log")
    reopened.close()
    assert entries == [_entry(1), _entry(2), _entry(3)]


def test_a_torn_tail_is_cut_so_new_records_follow_the_last_good_one(tmp_path: Path) -> None:
    # given a journal whose last write was cut short by a crash
    path = tmp_path / "journal.log"
    journal, _ = Journal.open(path)
    journal.append(_entry(1))
    journal.close()
    good_size = path.stat().st_size
    with path.open("ab") as fh:
        fh.write(b"\x00\x00\x01\x00garbage")
    # when it is opened and written again
    journal, entries = Journal.open(path)
    assert [e.seq for e in entries] == [1]
    assert path.stat().st_size == good_size
    journal.append(_entry(2))
    journal.sync(2)
    journal.close()
    # then both good records are readable
    _, entries = Journal.open(path)
    assert [e.seq for e in entries] == [1, 2]


def test_truncate_empties_the_journal(tmp_path: Path) -> None:
    # given a journal with records that a snapshot now holds
    path = tmp_path / "journal.log"
    journal, _ = Journal.open(path)
    journal.append(_entry(1))
    journal.append(_entry(2))
    # when truncated, then it is empty and appends start from nothing
    journal.truncate(durable_through=2)
    assert journal.size == 0
    journal.append(_entry(3))
    journal.sync(3)
    journal.close()
    _, entries = Journal.open(path)
    assert [e.seq for e in entries] == [3]
