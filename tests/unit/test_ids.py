"""The request path's UUIDs: version 4, RFC 4122's variant, canonical text, and never the same twice."""

from __future__ import annotations

import os
import re
import threading
import uuid

from ferrymq import ids

CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def test_ids_are_canonical_random_uuids_and_distinct_across_many_pool_refills() -> None:
    made = [ids.uuid4() for _ in range(3000)]  # 48 KB of random bytes: the pool is refilled a dozen times
    assert len(set(made)) == len(made)
    for text in made:
        assert CANONICAL.fullmatch(text), text
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == text


def test_every_variant_digit_and_every_hex_digit_turn_up() -> None:
    made = [ids.uuid4() for _ in range(2000)]
    assert {text[19] for text in made} == set("89ab")
    assert set("".join(made).replace("-", "")) == set("0123456789abcdef")


def test_random_bytes_are_the_length_asked_for_and_never_repeat_across_refills() -> None:
    drawn = [ids.random_bytes(12) for _ in range(2000)]  # 24 KB: the pool is refilled several times
    assert all(len(nonce) == 12 for nonce in drawn)
    assert len(set(drawn)) == len(drawn)
    assert len(ids.random_bytes(10_000)) == 10_000  # more than a pool holds at once
    assert ids.random_bytes(0) == b""


def test_ids_and_nonces_share_the_pool_without_handing_out_the_same_bytes() -> None:
    nonce = ids.random_bytes(16)
    text = ids.uuid4()
    assert nonce.hex()[:8] != text[:8]
    assert ids.random_bytes(16) != nonce


def test_a_forked_child_draws_other_bytes_than_its_parent() -> None:
    # given a pool the parent has filled and partly used
    ids.random_bytes(12)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next nonce and id, to the parent
        os.close(read_end)
        os.write(write_end, ids.random_bytes(12) + ids.uuid4().encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        child = pipe.read()
    os.waitpid(pid, 0)
    # then the parent's next nonce and id are not the child's
    parent = ids.random_bytes(12) + ids.uuid4().encode()
    assert len(child) == len(parent) == 48
    assert child[:12] != parent[:12] and child[12:] != parent[12:]


def test_each_thread_draws_from_a_pool_of_its_own() -> None:
    # (two threads taking from one pool could both read its position before either moved it on)
    ids.random_bytes(100)
    seen: dict[str, int] = {}

    def draw() -> None:
        ids.random_bytes(12)
        seen["position"] = ids._pool.position

    thread = threading.Thread(target=draw)
    thread.start()
    thread.join()
    assert seen["position"] == 12 and ids._pool.position >= 100
