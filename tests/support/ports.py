"""Loopback ports for tests that must name them in advance."""

from __future__ import annotations

import socket


def consecutive_free_ports(count: int, *, avoid: range = range(0)) -> int:
    """The first of ``count`` consecutive loopback ports free just now, none of them in ``avoid``."""
    for _ in range(100):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            base = first.getsockname()[1]
            if any(p in avoid for p in range(base, base + count)):
                continue
            others = [socket.socket() for _ in range(count - 1)]
            try:
                for offset, sock in enumerate(others, start=1):
                    sock.bind(("127.0.0.1", base + offset))
            except OSError:
                continue
            finally:
                for sock in others:
                    sock.close()
        return base
    raise AssertionError(f"no {count} consecutive free ports")
