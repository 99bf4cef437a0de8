"""The worker's cache of recent message bodies: least recently used out first, bounded in bytes."""

from __future__ import annotations

from ferrymq.storage.log.body_cache import ENTRY_OVERHEAD, BodyCache

E = ENTRY_OVERHEAD


def test_bodies_past_the_limit_push_out_the_least_recently_used() -> None:
    # each body counts its bytes and what keeping it costs beside them
    cache = BodyCache(limit=3 * (E + 10))
    cache.put(1, "a" * 10)
    cache.put(2, b"b" * 10)
    cache.put(3, "c" * 10)
    assert cache.get(1) == "a" * 10  # 1 is now the most recently used
    cache.put(4, "d" * 10)
    assert cache.get(2) is None
    assert [cache.get(k) is not None for k in (1, 3, 4)] == [True, True, True]
    assert cache.size == 3 * (E + 10) and len(cache) == 3


def test_a_body_larger_than_the_cache_is_not_kept_and_takes_nothing_with_it_but_room() -> None:
    cache = BodyCache(limit=E + 10)
    cache.put(1, "x" * 5)
    cache.put(2, "y" * 50)
    assert len(cache) == 0 and cache.size == 0


def test_a_cache_of_no_bytes_keeps_nothing() -> None:
    cache = BodyCache(limit=0)
    cache.put(1, "x")
    assert cache.get(1) is None and cache.size == 0


def test_putting_a_key_again_and_dropping_it_keep_the_byte_count() -> None:
    cache = BodyCache(limit=4 * E)
    cache.put(1, "x" * 10)
    cache.put(1, "y" * 20)
    assert cache.size == E + 20 and cache.get(1) == "y" * 20
    cache.drop(1)
    cache.drop(1)
    assert cache.size == 0 and len(cache) == 0


def test_owners_are_told_apart() -> None:
    cache = BodyCache(limit=100)
    assert len({cache.owner() for _ in range(5)}) == 5
