"""A seeded random workload over FIFO and standard queues, dead-letter redrive, receive attempts and move tasks,
for tests that check that replaying records (in memory or from log files) rebuilds the same state."""

from __future__ import annotations

import random

from ferrymq.clock import ManualClock
from ferrymq.errors import InvalidParameterValue, OverLimit
from ferrymq.storage.engine import Engine, Redrive
from tests.support.engine_requests import fifo_message, plain_message

RETENTION = 120
FIFO_QUEUES = ["f-a.fifo", "f-b.fifo"]
STANDARD = "s-a"
FIFO_DLQ = "dlq.fifo"
DLQ = "dlq"
ALL_QUEUES = [*FIFO_QUEUES, STANDARD, FIFO_DLQ, DLQ]


def drive(engine: Engine, clock: ManualClock, rng: random.Random, steps: int, *, sweeps: bool = False) -> None:
    """Drive ``engine`` through ``steps`` random requests, moving ``clock`` between them; with ``sweeps``,
    the engine is swept now and then as the worker does."""
    handles: dict[str, list[str]] = {q: [] for q in ALL_QUEUES}
    tasks = 0
    for _ in range(steps):
        op = rng.random()
        q = rng.choice([*FIFO_QUEUES, STANDARD])
        fifo = q in FIFO_QUEUES
        redrive = Redrive(3, FIFO_DLQ if fifo else DLQ, fifo, f"arn:aws:sqs:us-east-1:000000000000:{q}", True)
        if op < 0.3:
            if fifo:
                ids = [f"id-{rng.randrange(400)}" for _ in range(rng.randint(1, 4))]
                engine.store(q, [fifo_message(f"g{rng.randrange(4)}", message_id=i) for i in ids], RETENTION,
                             fifo=True)
            else:
                engine.send(q, [plain_message(f"m{rng.random()}") for _ in range(rng.randint(1, 3))], RETENTION)
        elif op < 0.6:
            attempt = rng.choice([None, "att-1", "att-2"]) if fifo else None
            try:
                polled = engine.poll(q, rng.randint(1, 10), rng.choice([0, 1, 3, 30]), RETENTION,
                                     attempt_id=attempt, redrive=redrive, max_in_flight=rng.choice([None, 6]))
            except OverLimit:
                continue
            handles[q].extend(row[1] for row in polled.rows)
        elif op < 0.72 and handles[q]:
            recent = handles[q][-10:]
            engine.delete(q, rng.sample(recent, min(len(recent), rng.randint(1, 3))))
        elif op < 0.8 and handles[q]:
            engine.change_visibility(q, [(h, rng.choice([0, 1, 10])) for h in rng.sample(handles[q][-10:], 1)])
        elif op < 0.9:
            dlq = rng.choice([DLQ, FIFO_DLQ])
            try:
                engine.start_move_task(dlq, {"task_handle": f"t{tasks}", "source_arn": f"arn:{dlq}",
                                             "destination": None, "max_per_second": None, "started_ts": 1})
                tasks += 1
            except InvalidParameterValue:
                pass
            for queue_id, handle in engine.active_move_tasks():
                batch = engine.move_candidates(queue_id, handle, rng.randint(1, 3))
                if rng.random() < 0.5:
                    target = FIFO_QUEUES[0] if queue_id == FIFO_DLQ else STANDARD
                    engine.move_locally(queue_id, handle, [c.seq for c in batch], target, queue_id == FIFO_DLQ)
                elif rng.random() < 0.5:
                    engine.hold(queue_id, [c.seq for c in batch], 5)
                    engine.moved(queue_id, handle, [c.seq for c in batch])
                elif rng.random() < 0.3:
                    engine.cancel_move_task(queue_id, handle)
                    engine.end_move_task(queue_id, handle, "CANCELLED")
                elif engine.move_remaining(queue_id, handle) == 0:
                    engine.end_move_task(queue_id, handle, "COMPLETED")
        elif op < 0.92:
            engine.purge(q)
        else:
            engine.stats(q, rng.choice([RETENTION, 30]))
        if sweeps and rng.random() < 0.05:
            engine.sweep()
        clock.advance(rng.choice([0, 0, 0.001, 0.5, 0.5, 1, 1, 3, 40]))
