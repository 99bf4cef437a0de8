from ferrymq.clock import ManualClock
from ferrymq.ttl_cache import TtlCache


def test_entries_expire_after_ttl() -> None:
    clock = ManualClock()
    cache: TtlCache[str, int] = TtlCache(clock, ttl=10)
    cache.put("a", 1)
    clock.advance(9.9)
    assert cache.get("a") == 1
    clock.advance(0.1)
    assert cache.get("a") is None


def test_oldest_stored_entries_go_first_past_the_bound() -> None:
    cache: TtlCache[int, int] = TtlCache(ManualClock(), ttl=60, max_entries=2)
    cache.put(1, 1)
    cache.put(2, 2)
    cache.put(1, 10)  # storing again makes it the newest
    cache.put(3, 3)
    assert (cache.get(1), cache.get(2), cache.get(3)) == (10, None, 3)


def test_pop_of_a_missing_key_is_harmless() -> None:
    cache: TtlCache[str, int] = TtlCache(ManualClock(), ttl=1)
    cache.pop("nothing")
    cache.put("x", 1)
    cache.pop("x")
    assert cache.get("x") is None


def test_the_bound_holds_however_many_keys_are_stored() -> None:
    # given a cache bounded to three entries
    cache: TtlCache[int, int] = TtlCache(ManualClock(), ttl=60, max_entries=3)
    # when a thousand different keys are stored
    for key in range(1000):
        cache.put(key, key)
    # then it holds three: the newest
    assert len(cache) == 3
    assert [cache.get(k) for k in (996, 997, 998, 999)] == [None, 997, 998, 999]


def test_an_expired_entry_read_is_dropped() -> None:
    # given an entry past its ttl
    clock = ManualClock()
    cache: TtlCache[str, int] = TtlCache(clock, ttl=1)
    cache.put("a", 1)
    clock.advance(1)
    # when it is read, then it is a miss and no longer held
    assert cache.get("a") is None
    assert len(cache) == 0


def test_expired_entries_nobody_asks_for_again_are_dropped_as_new_ones_arrive() -> None:
    # given a cache filled with keys that are never read again (queues created and deleted)
    clock = ManualClock()
    cache: TtlCache[int, int] = TtlCache(clock, ttl=30, max_entries=10_000)
    for key in range(1000):
        cache.put(key, key)
        clock.advance(1)
    # then it holds only what the last 30 seconds stored, far below its bound
    assert len(cache) == 30
    assert cache.get(999) == 999 and cache.get(969) is None


def test_clear_forgets_every_entry() -> None:
    cache: TtlCache[str, int] = TtlCache(ManualClock(), ttl=60)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.clear()
    assert (len(cache), cache.get("a"), cache.get("b")) == (0, None, None)
