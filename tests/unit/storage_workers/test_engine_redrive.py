"""Dead-letter redrive on receive: to a dead-letter queue of the same partition in one record, or handed back
to the worker for another worker's queue, driven with a manual clock."""

from __future__ import annotations

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine, Redrive
from ferrymq.storage.engine.records import BATCH, DELETED, STORED, VISIBILITY
from tests.support.engine_requests import RETENTION, bodies, fifo_message, plain_message, poll

SRC = "000000000000/work/1"
DLQ = "000000000000/work-dlq/2"
SRC_ARN = "arn:aws:sqs:us-east-1:000000000000:work"
FIFO_SRC = "000000000000/work.fifo/3"
FIFO_DLQ = "000000000000/work-dlq.fifo/4"


def redrive(max_receive_count: int = 2, *, local: bool = True, fifo: bool = False) -> Redrive:
    return Redrive(max_receive_count, FIFO_DLQ if fifo else DLQ, fifo, SRC_ARN, local)


def receive_and_time_out(engine: Engine, clock: ManualClock, queue: str, times: int, **kwargs: object) -> None:
    for _ in range(times):
        poll(engine, queue, visibility=1, **kwargs)  # type: ignore[arg-type]
        clock.advance(1)


def test_a_message_received_max_receive_count_times_moves_to_the_dead_letter_queue(
    engine: Engine, clock: ManualClock, records: list
) -> None:
    # given a message received twice (the limit) without being deleted, and a fresh one behind it
    poison = plain_message("poison", system={"SenderId": "AIDA"})
    sent_ts = engine.send(SRC, [poison], RETENTION)
    receive_and_time_out(engine, clock, SRC, 2, redrive=redrive())
    engine.send(SRC, [plain_message("fine")], RETENTION)
    first_receive_ts = sent_ts
    # when the source is received from again
    got, polled = poll(engine, SRC, redrive=redrive())
    # then the poison message is not returned but moved, in one record, and the fresh one is returned
    assert [m["body"] for m in got] == ["fine"]
    assert polled.dead_letters == []
    moves = [r for r in records if r[0] == BATCH]
    assert len(moves) == 1 and [inner[0] for inner in moves[0][1]] == [STORED, DELETED]
    # and in the dead-letter queue it keeps its id, body, sent time and receive count, and names its source
    (dead,), _ = poll(engine, DLQ, visibility=30)
    assert (dead["id"], dead["body"], dead["sent_ts"]) == (poison[0], "poison", sent_ts)
    assert dead["receive_count"] == 3 and dead["first_receive_ts"] == first_receive_ts
    assert dead["system"] == {"SenderId": "AIDA", "DeadLetterQueueSourceArn": SRC_ARN}
    assert engine.stats(SRC, RETENTION) == (0, 1, 0)


def test_messages_below_the_limit_are_received_as_usual(engine: Engine, clock: ManualClock) -> None:
    engine.send(SRC, [plain_message("m")], RETENTION)
    receive_and_time_out(engine, clock, SRC, 2, redrive=redrive(3))
    assert bodies(engine, SRC, redrive=redrive(3)) == ["m"]
    assert DLQ not in engine.queues


def test_a_standard_dead_letter_queue_keeps_the_original_enqueue_time_for_retention(
    engine: Engine, clock: ManualClock
) -> None:
    # given a message moved to the DLQ after a day in its source queue
    sent_ts = engine.send(SRC, [plain_message("old")], RETENTION)
    poll(engine, SRC, visibility=86400, redrive=redrive(1))
    clock.advance(86400)
    poll(engine, SRC, redrive=redrive(1))
    # then the DLQ expires it by its original send time: with a 2-day retention, one more day is left
    clock.advance(86400 - 1)
    (dead,), _ = poll(engine, DLQ, visibility=0, retention=2 * 86400)
    assert dead["sent_ts"] == sent_ts
    clock.advance(1)
    assert bodies(engine, DLQ, retention=2 * 86400) == []


def test_a_fifo_dead_letter_queue_keeps_the_group_and_takes_the_message_id_as_dedup_id(
    engine: Engine, clock: ManualClock
) -> None:
    # given a FIFO group whose first message reached the limit, with a second message behind it
    engine.store(FIFO_SRC, [fifo_message("g", "poison", message_id="p"), fifo_message("g", "next")], RETENTION,
                 fifo=True)
    poll(engine, FIFO_SRC, n=1, visibility=1)
    clock.advance(1)
    # when received again under a limit of 1
    got, _ = poll(engine, FIFO_SRC, redrive=redrive(1, fifo=True))
    # then the next message of the group is delivered at once, and the poison one is in the FIFO DLQ
    assert [m["body"] for m in got] == ["next"]
    (dead,), _ = poll(engine, FIFO_DLQ)
    assert (dead["id"], dead["group"], dead["dedup_id"]) == ("p", "g", "p")
    # and its enqueue time is reset, as SQS does for FIFO dead-letter queues
    assert dead["sent_ts"] == int(clock.now() * 1000)
    assert engine.is_fifo(FIFO_DLQ)


def test_a_dead_letter_queue_on_another_worker_gets_the_message_handed_over(
    engine: Engine, clock: ManualClock, records: list
) -> None:
    # given a message at the limit whose DLQ another worker leads
    poison = plain_message("poison")
    sent_ts = engine.send(SRC, [poison], RETENTION)
    receive_and_time_out(engine, clock, SRC, 1)
    # when received again, then it is not returned but handed back, held in flight, as the DLQ is to store it
    got, polled = poll(engine, SRC, redrive=redrive(1, local=False))
    assert got == []
    (out,) = polled.dead_letters
    assert (out.id, out.sent_ts, out.receive_count) == (poison[0], sent_ts, 1)
    assert out.system["DeadLetterQueueSourceArn"] == SRC_ARN
    assert records[-1][0] == VISIBILITY
    assert engine.stats(SRC, RETENTION) == (0, 1, 0)
    # when the other worker acknowledged it, then it leaves the source
    engine.handed_over(SRC, [out.seq])
    assert engine.stats(SRC, RETENTION) == (0, 0, 0)


def test_a_hand_over_that_never_finishes_is_tried_again_once_the_hold_runs_out(
    engine: Engine, clock: ManualClock
) -> None:
    engine.send(SRC, [plain_message("poison")], RETENTION)
    receive_and_time_out(engine, clock, SRC, 1)
    _, first = poll(engine, SRC, redrive=redrive(1, local=False))
    # while held, nothing is handed out again
    assert poll(engine, SRC, redrive=redrive(1, local=False))[1].dead_letters == []
    # once the hold runs out, the next receive hands the same message over again, with the same id
    clock.advance(engine.transfer_hold_seconds)
    _, again = poll(engine, SRC, redrive=redrive(1, local=False))
    assert [c.id for c in again.dead_letters] == [c.id for c in first.dead_letters]


def test_a_fifo_group_waits_while_its_message_is_handed_to_another_worker(engine: Engine, clock: ManualClock) -> None:
    # given a FIFO group whose first message reached the limit and is being handed over
    engine.store(FIFO_SRC, [fifo_message("g", "poison"), fifo_message("g", "next")], RETENTION, fifo=True)
    poll(engine, FIFO_SRC, n=1, visibility=1)
    clock.advance(1)
    got, polled = poll(engine, FIFO_SRC, redrive=redrive(1, local=False, fifo=True))
    # then the rest of the group waits until the hand-over finished
    assert got == [] and len(polled.dead_letters) == 1
    assert bodies(engine, FIFO_SRC, redrive=redrive(1, local=False, fifo=True)) == []
    engine.handed_over(FIFO_SRC, [polled.dead_letters[0].seq])
    assert bodies(engine, FIFO_SRC, redrive=redrive(1, local=False, fifo=True)) == ["next"]


def test_a_dead_letter_queue_recognises_a_handed_over_message_sent_twice(engine: Engine) -> None:
    # given a message handed over from another worker, as a DLQ receives it
    origin = (1_699_999_000_000, 3, 1_699_999_100_000)
    handed = ("id-1", "body", {}, "md5", None, 0, {"DeadLetterQueueSourceArn": SRC_ARN}, None, None, origin)
    [(_, sent_ts, seq, duplicate)] = engine.store(DLQ, [handed], RETENTION, fifo=False)
    # then it keeps its history (the receive here counts as its fourth)
    assert not duplicate and sent_ts == origin[0]
    (got,), _ = poll(engine, DLQ)
    assert (got["receive_count"], got["first_receive_ts"]) == (4, origin[2])
    # and when the source sends it again (it crashed before removing it), nothing new is stored
    assert engine.store(DLQ, [handed], RETENTION, fifo=False) == [("id-1", sent_ts, seq, True)]
    assert engine.stats(DLQ, RETENTION) == (0, 1, 0)
