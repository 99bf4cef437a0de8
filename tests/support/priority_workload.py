"""A seeded random workload over standard queues with priority levels (``docs/design/priorities.md``), for tests
that check that replaying records, snapshots and compacted logs keep every message's level and the scheduler's
credits."""

from __future__ import annotations

import random
import uuid

from ferrymq.clock import ManualClock
from ferrymq.priorities import SYSTEM_KEY
from ferrymq.storage.engine import Engine

QUEUES = ("pa", "pb")
RETENTION = 600


def leveled_message(body: str, level: int = 0, *, delay: int = 0) -> list:
    """A standard message as the front end sends it: its level, when above 0, in the system attributes, and the
    attribute that chose it."""
    system: dict = {"SenderId": "AIDATEST"}
    if level:
        system[SYSTEM_KEY] = level
    attrs = {"FerryMQPriority": {"DataType": "Number", "StringValue": str(level)}}
    return [str(uuid.uuid4()), body, attrs, f"md5-{body}", "md5-attrs", delay, system]


def drive_priorities(engine: Engine, clock: ManualClock, rng: random.Random, steps: int) -> None:
    """Random sends of levels 0-5 (some delayed), receives naming 1 to 4 levels, deletes, visibility changes,
    purges and expiry, on :data:`QUEUES`."""
    handles: list[tuple[str, str]] = []
    for _ in range(steps):
        queue = rng.choice(QUEUES)
        op = rng.random()
        if op < 0.4:
            batch = [leveled_message(f"m{rng.random()}" * rng.choice([1, 1, 20]), rng.randrange(6),
                                     delay=rng.choice([0, 0, 0, 2])) for _ in range(rng.randint(1, 5))]
            engine.send(queue, batch, RETENTION)
        elif op < 0.75:
            polled = engine.poll(queue, rng.randint(1, 10), rng.choice([0, 1, 3, 30]), RETENTION,
                                 priority_levels=rng.choice([1, 2, 4, 4]))
            handles += [(queue, row[1]) for row in polled.rows]
        elif op < 0.88 and handles:
            queue, handle = handles.pop(rng.randrange(len(handles)))
            engine.delete(queue, [handle])
        elif op < 0.97 and handles:
            queue, handle = rng.choice(handles)
            engine.change_visibility(queue, [(handle, rng.choice([0, 2]))])
        elif op < 0.98:
            engine.purge(queue)
        clock.advance(rng.choice([0, 0.001, 0.5, 1, 3, 30]))


def same_picks(a: Engine, b: Engine) -> None:
    """Both engines answer the next receives alike, with and without levels."""
    for queue in QUEUES:
        for levels in (4, 1):
            assert a.poll(queue, 10, 30, RETENTION, priority_levels=levels) == b.poll(
                queue, 10, 30, RETENTION, priority_levels=levels
            )
