"""The request path's UUIDs: version 4, RFC 4122's variant, canonical text, and never the same twice."""

from __future__ import annotations

import re
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
