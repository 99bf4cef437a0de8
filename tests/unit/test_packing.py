"""msgpack with a Packer kept per thread (``ferrymq.packing``): the bytes ``msgpack.packb`` gives, from any thread,
and after a value it cannot pack."""

from __future__ import annotations

import threading

import msgpack
import pytest

from ferrymq.packing import pack

VALUES = [
    None, 0, -1, 2**63 - 1, "", "é" * 300, b"\0" * 70_000, [1, [2, [3]]], (1, "two", b"three"),
    {"k": [1.5, True, None]}, ("x" * 256, {}, "0" * 32, None),
]


@pytest.mark.parametrize("value", VALUES)
def test_pack_gives_what_packb_gives(value: object) -> None:
    assert pack(value) == msgpack.packb(value, use_bin_type=True)


def test_a_value_it_cannot_pack_raises_and_leaves_nothing_behind_for_the_next() -> None:
    with pytest.raises(TypeError):
        pack([1, 2, object()])
    assert pack([3]) == msgpack.packb([3], use_bin_type=True)


def test_threads_packing_at_once_each_get_their_own_bytes() -> None:
    wrong: list[object] = []

    def packs(n: int) -> None:
        for i in range(2000):
            value = [n, i, "x" * (n * 100 + i % 7)]
            if msgpack.unpackb(pack(value), raw=False) != value:
                wrong.append(value)

    threads = [threading.Thread(target=packs, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
