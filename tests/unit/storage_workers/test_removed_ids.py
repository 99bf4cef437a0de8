"""``RemovedIds``: a queue's removed ids in ordered chunks, read as one ordered dict."""

from __future__ import annotations

import gc
import pickle
from collections import OrderedDict, deque

import pytest

from ferrymq.storage.engine import removed_ids
from ferrymq.storage.engine.removed_ids import RemovedIds


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(removed_ids, "CHUNK", 4)


def test_ids_across_chunks_read_as_one_ordered_dict_and_are_forgotten_oldest_first() -> None:
    ids = RemovedIds()
    expected: OrderedDict[str, int] = OrderedDict()
    # given ids spread over several chunks (four each here), sent at various times
    for i in range(11):
        ids[f"m{i}"] = 1000 + (i % 3)
        expected[f"m{i}"] = 1000 + (i % 3)
    # then they read as the ordered dict would
    assert len(ids) == 11 and list(ids) == list(expected) and list(ids.items()) == list(expected.items())
    assert ids["m5"] == expected["m5"] and "m10" in ids and "m11" not in ids and dict(ids) == dict(expected)
    with pytest.raises(KeyError):
        ids["m11"]
    # when forgotten before 1001 with a budget of two: the oldest goes, then the next is sent at 1001 and stops it
    assert ids.forget_before(1001, 2) is False
    assert list(ids)[:2] == ["m1", "m2"]
    # and forgetting everything goes across the chunks, a budget at a time, saying when it stopped at the budget
    assert ids.forget_before(2000, 5) is True
    assert len(ids) == 5
    assert ids.forget_before(2000, 5) is True  # it stopped at the budget, though none is left
    assert not ids and len(ids) == 0
    assert ids.forget_before(2000, 5) is False


def test_removed_ids_pickle_and_compare_in_order() -> None:
    a = RemovedIds((f"m{i}", i) for i in range(9))
    b = pickle.loads(pickle.dumps(a))
    assert a == b and list(b.items()) == [(f"m{i}", i) for i in range(9)]
    assert a != RemovedIds((f"m{i}", i) for i in reversed(range(9)))


def test_chunks_are_dicts_the_garbage_collector_does_not_track_and_holes_in_front_are_copied_away() -> None:
    ids = RemovedIds((f"m{i}", 1000 + i) for i in range(10))
    assert all(type(chunk) is dict and not gc.is_tracked(chunk) for chunk in ids._chunks)
    # when the first chunk's entries are forgotten one at a time, its holes never outnumber what it holds
    for i in range(9):
        assert ids.forget_before(1001 + i, 1) is True
        assert ids._holes <= len(ids._chunks[0])
    assert list(ids.items()) == [("m9", 1009)]


def test_removed_ids_pickled_in_ordered_chunks_load_as_plain_ones_in_their_order() -> None:
    # given removed ids as the version before pickled them: chunks of ordered dicts, no count of holes
    ids = RemovedIds.__new__(RemovedIds)
    chunks = deque([OrderedDict((f"m{i}", i) for i in range(4)), OrderedDict((f"m{i}", i) for i in range(4, 6))])
    ids.__setstate__((None, {"_chunks": chunks}))
    # then they read as before, in plain chunks, and are forgotten oldest first
    assert [type(chunk) for chunk in ids._chunks] == [dict, dict]
    assert list(ids.items()) == [(f"m{i}", i) for i in range(6)]
    assert ids.forget_before(5, 10) is False and list(ids) == ["m5"]
