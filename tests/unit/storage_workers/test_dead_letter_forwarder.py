"""Dead-letter hand-overs to a worker that does not answer: one per message at most, a bounded number at once,
and what is left out counted, held for a later receive."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest

from ferrymq.destinations import QueueTarget
from ferrymq.storage import handover
from ferrymq.storage.engine import Outgoing
from ferrymq.storage.handover import DeadLetterForwarder

SOURCE = "000000000000/work/1"
DLQ = QueueTarget("000000000000/work-dlq/2", 5, False, 345_600, "arn:aws:sqs:us-east-1:000000000000:work-dlq")


class StuckWorker:
    """The dead-letter queue's worker: every send waits until the test lets them all through."""

    def __init__(self) -> None:
        self.sends: list[list[str]] = []
        self.partitions: set[int] = set()
        self.answer = asyncio.Event()

    async def send(
        self, partition: int, queue_id: str, messages: list[dict], *, retention_seconds: int, fifo: bool
    ) -> list[dict]:
        self.partitions.add(partition)
        self.sends.append([m["id"] for m in messages])
        await self.answer.wait()
        return [{"id": m["id"], "sent_ts": 0, "duplicate": False} for m in messages]


class Peers:
    partition = 0

    def __init__(self, worker: StuckWorker) -> None:
        self._worker = worker

    async def worker(self, partition: int) -> StuckWorker:
        return self._worker

    async def forget(self, partition: int) -> None:
        return None

    async def queue(self, arn: str) -> QueueTarget | None:
        return None

    async def close(self) -> None:
        return None


class Source:
    """The engine of the source queue, as far as a hand-over tells it that messages left."""

    def __init__(self) -> None:
        self.left: list[int] = []

    def handed_over(self, queue_id: str, seqs: Sequence[int]) -> None:
        self.left.extend(seqs)


def dead(seq: int) -> Outgoing:
    return Outgoing(seq, f"id-{seq}", "body", {}, "md5", None, {}, None, 5, 0, None, None)


async def settle() -> None:
    """Let every task that can run, run (none of them waits on a timer)."""
    for _ in range(20):
        await asyncio.sleep(0)


def forwarder(source: Source, worker: StuckWorker, **limits: int) -> DeadLetterForwarder:
    return DeadLetterForwarder(source, Peers(worker), **limits)  # type: ignore[arg-type]


def test_dead_letters_on_their_way_are_not_sent_again() -> None:
    async def scenario() -> None:
        # given a dead-letter queue whose worker does not answer, and three dead letters on their way
        source, worker = Source(), StuckWorker()
        forwarding = forwarder(source, worker)
        letters = [dead(1), dead(2), dead(3)]
        forwarding.submit(SOURCE, DLQ, letters)
        await settle()
        # when later receives find the same messages dead again, with one new one
        forwarding.submit(SOURCE, DLQ, letters)
        forwarding.submit(SOURCE, DLQ, [*letters, dead(4)])
        await settle()
        # then only the new one starts a second hand-over, and the repeats are counted as deferred
        assert worker.sends == [["id-1", "id-2", "id-3"], ["id-4"]]
        assert worker.partitions == {DLQ.partition}
        assert (forwarding.in_flight, forwarding.deferred, forwarding.forwarded) == (2, 6, 0)
        # when the worker answers, then all four have left the source, once each
        worker.answer.set()
        await settle()
        assert sorted(source.left) == [1, 2, 3, 4]
        assert (forwarding.in_flight, forwarding.forwarded) == (0, 4)
        # and a message offered again after its hand-over ended is sent again (the DLQ recognises the resend)
        forwarding.submit(SOURCE, DLQ, [dead(1)])
        await settle()
        assert worker.sends[-1] == ["id-1"]
        await forwarding.close()

    asyncio.run(scenario())


def test_a_flood_of_dead_letters_runs_a_bounded_number_of_hand_overs(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        # given at most four hand-overs at once, to a worker that does not answer
        source, worker = Source(), StuckWorker()
        forwarding = forwarder(source, worker, max_in_flight=4)
        # when twenty receives each find another message dead
        for seq in range(20):
            forwarding.submit(SOURCE, DLQ, [dead(seq)])
        await settle()
        # then four hand-overs run, the other sixteen messages stay held, and the full house is reported once
        assert (len(worker.sends), forwarding.in_flight, forwarding.deferred) == (4, 4, 16)
        assert len([r for r in caplog.records if r.name == handover.__name__]) == 1
        # when the worker answers, then those four are forwarded and new hand-overs may start
        worker.answer.set()
        await settle()
        assert (forwarding.in_flight, forwarding.forwarded) == (0, 4)
        forwarding.submit(SOURCE, DLQ, [dead(7)])
        await settle()
        assert forwarding.forwarded == 5
        await forwarding.close()

    with caplog.at_level(logging.WARNING, logger=handover.__name__):
        asyncio.run(scenario())


def test_hand_overs_cancelled_before_they_ran_free_their_messages() -> None:
    async def scenario() -> None:
        # given a hand-over submitted and cancelled by close before it could start
        source, worker = Source(), StuckWorker()
        forwarding = forwarder(source, worker)
        forwarding.submit(SOURCE, DLQ, [dead(1)])
        await forwarding.close()
        assert (forwarding.in_flight, worker.sends) == (0, [])
        # when the message is offered again, then it is sent
        forwarding.submit(SOURCE, DLQ, [dead(1)])
        await settle()
        assert worker.sends == [["id-1"]]
        await forwarding.close()

    asyncio.run(scenario())
