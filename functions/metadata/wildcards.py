"""IAM's wildcard match (``*``: any run of characters, ``?``: any one character), in time linear in the value.

Policies are written by queue owners and matched on every request another account makes, so a pattern must
never cost more than a bounded amount of work.  Translating ``*`` into a regex ``.*`` does not: a backtracking
engine tries every way of splitting the value between the stars, so ``*a*a*a*a*a*a*X`` against eighty ``a``s
held the event loop for seconds, ten times longer per extra ``*a``.

Instead a pattern is split at its stars into fixed-length parts::

    head * part * part * ... * tail

``head`` must match the value's start and ``tail`` its end; each middle part is placed at its leftmost
position after the previous one (taking the earliest place never loses a match that a later one would find,
so nothing is ever undone).  A part without ``?`` is found by ``str.find``; a part with ``?`` by a regex of
literals and ``.`` only, which has nothing to backtrack over: each start position is tried once, with at most
``len(part)`` comparisons.  The whole match costs O(len(value) x len(pattern)) at worst, in C.

Comparison is exact, or case-insensitive with ``ignore_case`` (IAM compares action names that way).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class _Plan:
    head: str
    middle: tuple[str, ...]  # the non-empty parts between stars (consecutive stars leave empty ones out)
    tail: str
    starred: bool  # whether the pattern has a star at all (else head is the whole pattern and tail is empty)


@functools.lru_cache(maxsize=4_096)
def _plan(pattern: str) -> _Plan:
    parts = pattern.split("*")
    if len(parts) == 1:
        return _Plan(pattern, (), "", False)
    return _Plan(parts[0], tuple(p for p in parts[1:-1] if p), parts[-1], True)


@functools.lru_cache(maxsize=4_096)
def _part_regex(part: str) -> re.Pattern[str]:
    # Literals and "." only: no quantifier, no alternation, so no backtracking.
    return re.compile("".join("." if c == "?" else re.escape(c) for c in part), re.DOTALL)


def _fits(part: str, value: str, at: int) -> bool:
    """Whether ``part`` (``?`` allowed) matches ``value`` at ``at``; the caller checked that it fits in length."""
    if "?" not in part:
        return value.startswith(part, at)
    return _part_regex(part).match(value, at, at + len(part)) is not None


def _find(part: str, value: str, start: int, end: int) -> int:
    """The leftmost place at or after ``start`` where ``part`` ends no later than ``end``; -1 if none."""
    if "?" not in part:
        return value.find(part, start, end)
    found = _part_regex(part).search(value, start, end)
    return -1 if found is None else found.start()


def wildcard_match(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """Whether ``value`` as a whole matches ``pattern`` with IAM's ``*`` and ``?``."""
    if ignore_case:
        pattern, value = pattern.lower(), value.lower()
    if pattern == value or pattern == "*":
        return True
    plan = _plan(pattern)
    if not plan.starred:
        return len(value) == len(pattern) and _fits(pattern, value, 0)
    head, tail = plan.head, plan.tail
    end = len(value) - len(tail)
    if end < len(head) or not _fits(head, value, 0) or not _fits(tail, value, end):
        return False
    at = len(head)
    for part in plan.middle:
        found = _find(part, value, at, end)
        if found < 0:
            return False
        at = found + len(part)
    return True
