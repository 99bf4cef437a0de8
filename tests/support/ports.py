"""Loopback ports for tests that must name them in advance.

They are taken below the machine's ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``), from which the
kernel hands out the local ports of outgoing connections and of listeners bound to port 0: a port free when chosen
there can be taken a moment later by any process (a worker's connection to the stand-in, a follower's to its
leader, another test's stack listening on "any free port"), and a worker told to listen on it then fails to start,
as one did in CI.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 10_000
"""Below it, ports that services of the machine commonly listen on."""


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _all_free(base: int, count: int) -> bool:
    held = [socket.socket() for _ in range(count)]
    try:
        for offset, sock in enumerate(held):
            sock.bind(("127.0.0.1", base + offset))
    except OSError:
        return False
    finally:
        for sock in held:
            sock.close()
    return True


def consecutive_free_ports(count: int, *, avoid: range = range(0)) -> int:
    """The first of ``count`` consecutive loopback ports free just now, none of them in ``avoid`` nor in the
    ephemeral range."""
    highest = _ephemeral_start() - count
    for _ in range(200):
        base = random.randint(LOWEST, highest)
        if any(p in avoid for p in range(base, base + count)):
            continue
        if _all_free(base, count):
            return base
    raise AssertionError(f"no {count} consecutive free ports below the ephemeral range")
