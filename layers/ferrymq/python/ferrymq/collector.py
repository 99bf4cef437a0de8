"""The garbage collector's settings for a long-running process, applied once it has started.

A process of the stack starts by importing boto3, botocore's service models, uvicorn and its own code: several
hundred thousand objects that live as long as it does. CPython's collector would walk every one of them at each
full collection, and its default threshold runs a young collection every 700 allocations, about one per
request: together about 7 % of the gateway's CPU under load (py-spy, SendMessage on 16 connections). Garbage of
the request path is freed by reference counting; only reference cycles need the collector, and those are few.

:func:`settle` collects once, moves what survived into the permanent generation (``gc.freeze``: never walked
again, still freed by reference counting) and makes young collections rarer.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000
"""Allocations between two young collections (CPython's default: 700)."""


def settle() -> None:
    """Call once the process has started and before it serves: a full collection (tens of milliseconds), then
    the start-up's objects frozen and the young threshold raised."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
