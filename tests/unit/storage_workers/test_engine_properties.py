"""Random request histories through the engine, checked against a plain reference model, and replays of what
the engine recorded checked against the engine itself.

The model (:class:`Model`) keeps every message as a small object in a dict and answers each request by the rules
the engine's docstrings state, in the plainest way: standard queues oldest first (with the smooth weighted round
robin over priority levels of :mod:`ferrymq.storage.engine.priorities`), FIFO queues by ready group, expiry
swept from the front of send order, redrive to a dead-letter queue of the same partition, FIFO receive attempts.
Each request's answer (ids, receive counts, bodies, per-handle results, counts, peeks) must be the model's.

Then what the engine emitted is replayed (what recovery and followers do) and its snapshot is replayed (what
compaction writes): both must hold the same state, and answer the same requests the same way as the engine
that made the records, since a follower that takes over must go on exactly where its leader stood.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ferrymq.clock import ManualClock
from ferrymq.errors import InvalidParameterValue, OverLimit, ReceiptHandleIsInvalid
from ferrymq.limits import RECEIVE_ATTEMPT_WINDOW_MS
from ferrymq.priorities import SYSTEM_KEY, weight
from ferrymq.storage.engine import Engine, PartitionState, Redrive
from ferrymq.storage.engine.records import Record
from ferrymq.storage.engine.tasks import DLQ_SOURCE_ARN
from tests.fuzz.profiles import fuzz_settings
from tests.support.engine_requests import RECEIPT_KEY, as_dicts, fifo_message

PLAIN = "000000000000/plain/1"
PRIO = "000000000000/prio/1"
FIFO = "000000000000/orders.fifo/1"
DLQ = "000000000000/dead/1"
QUEUES = (PLAIN, PRIO, FIFO, DLQ)
RETENTION = 400
PRIO_LEVELS = 3
MAX_RECEIVES = 1
SOURCE_ARN = "arn:aws:sqs:us-east-1:000000000000:plain"
REDRIVE = Redrive(MAX_RECEIVES, DLQ, False, SOURCE_ARN, True)
INVALID = InvalidParameterValue.code
BAD_HANDLE = ReceiptHandleIsInvalid.code

READY, DELAYED, IN_FLIGHT = 0, 1, 2


@dataclass
class Msg:
    id: str
    seq: int
    body: str
    sent: int
    visible_at: int
    state: int
    level: int = 0
    group: str | None = None
    rc: int = 0
    attempt: str | None = None
    system: dict = field(default_factory=dict)


@dataclass
class Queue:
    msgs: dict[int, Msg] = field(default_factory=dict)
    credits: list[int] | None = None
    tiers: bool = False
    attempts: dict[str, tuple[int, list[int]]] = field(default_factory=dict)


class Model:
    """What the engine should answer, computed the plain way."""

    def __init__(self) -> None:
        self.queues: dict[str, Queue] = {}
        self.next_seq = 1

    def q(self, name: str) -> Queue:
        return self.queues.setdefault(name, Queue())

    # --- changes -------------------------------------------------------------------------------------

    def add(self, name: str, m: Msg) -> None:
        q = self.q(name)
        q.msgs[m.seq] = m
        if m.state == READY and m.level:
            q.tiers = True

    def remove(self, name: str, seqs: list[int]) -> None:
        q = self.q(name)
        for seq in seqs:
            m = q.msgs.pop(seq, None)
            if m is not None and m.attempt is not None:
                self.forget_attempt(q, m.attempt)
        if not q.msgs:
            q.tiers, q.credits = False, None

    def forget_attempt(self, q: Queue, attempt: str) -> None:
        known = q.attempts.pop(attempt, None)
        for seq in known[1] if known else ():
            m = q.msgs.get(seq)
            if m is not None and m.attempt == attempt:
                m.attempt = None

    def release(self, name: str, now: int) -> None:
        q = self.q(name)
        for m in q.msgs.values():
            if m.state != READY and m.visible_at <= now:
                m.state = READY
                if m.level:
                    q.tiers = True

    def expire(self, name: str, now: int) -> None:
        """The front of send order, swept while expired (as the engine's ``_expire``)."""
        q = self.q(name)
        cutoff = now - RETENTION * 1000
        gone: list[int] = []
        for seq in sorted(q.msgs):
            if q.msgs[seq].sent > cutoff:
                break
            gone.append(seq)
        self.remove(name, gone)

    def hold(self, name: str, m: Msg, until: int) -> None:
        m.visible_at, m.state = until, IN_FLIGHT

    # --- what is where ------------------------------------------------------------------------------------

    def counts(self, name: str) -> tuple[int, int, int]:
        states = [m.state for m in self.q(name).msgs.values()]
        return (states.count(READY), states.count(IN_FLIGHT), states.count(DELAYED))

    def peek(self, name: str, now: int, n: int) -> list[str]:
        cutoff = now - RETENTION * 1000
        q = self.q(name)
        shown = [q.msgs[s].id for s in sorted(q.msgs) if q.msgs[s].visible_at <= now and q.msgs[s].sent > cutoff]
        return shown[:n]

    def visible_in_order(self, name: str) -> list[Msg]:
        q = self.q(name)
        return [q.msgs[s] for s in sorted(q.msgs) if q.msgs[s].state == READY]

    # --- picking --------------------------------------------------------------------------------------

    def pops_standard(self, name: str, levels: int) -> tuple[list[Msg], list[list[int]] | None]:
        """Every visible message in the order successive pops take them, and (queues whose priority tiers are
        in use) the credits after each number of pops, then after the pop that finds nothing."""
        q = self.q(name)
        visible = self.visible_in_order(name)
        if not q.tiers:
            return visible, None
        served: list[list[Msg]] = [[] for _ in range(levels)]
        for m in visible:
            served[min(m.level, levels - 1)].append(m)
        credits = list(q.credits or ())[:levels] if levels > 1 else []
        credits += [0] * (levels - len(credits))
        out: list[Msg] = []
        trail = [list(credits)]
        while any(served):
            best, total = -1, 0
            for e in range(levels - 1, -1, -1):
                if served[e]:
                    credits[e] += weight(e)
                    total += weight(e)
                    if best < 0 or credits[e] > credits[best]:
                        best = e
                else:
                    credits[e] = 0
            credits[best] -= total
            out.append(served[best].pop(0))
            trail.append(list(credits))
        trail.append([0] * levels)
        return out, trail

    def poll(self, name: str, now: int, n: int, vis: int, *, levels: int = 1, redrive: bool = False,
             max_in_flight: int | None = None, attempt: str | None = None) -> list[tuple[str, int, str]]:
        q = self.queues.get(name)
        if q is None or not q.msgs:
            return []
        self.release(name, now)
        self.expire(name, now)
        if attempt is not None and name == FIFO:
            replay = self.replayable(q, attempt, now)
            if replay is not None:
                for m in replay:
                    self.hold(name, m, now + vis * 1000)
                return [(m.id, m.rc, m.body) for m in replay]
        if max_in_flight is not None:
            room = max_in_flight - self.counts(name)[1]
            if room <= 0:
                raise OverLimit("")
            n = min(n, room)
        cutoff = now - RETENTION * 1000
        picked: list[Msg] = []
        expired: list[int] = []
        dead: list[Msg] = []
        if name == FIFO:
            picked, expired = self.pick_fifo(q, n, cutoff)
        else:
            pops, trail = self.pops_standard(name, levels)
            taken = 0
            for m in pops:
                if len(picked) >= n:
                    break
                taken += 1
                if m.sent <= cutoff:
                    expired.append(m.seq)
                elif redrive and m.rc >= MAX_RECEIVES:
                    dead.append(m)
                else:
                    picked.append(m)
            if trail is not None:
                # Short of n, the picker's last pop found nothing, which zeroes every credit.
                credits = trail[taken] if len(picked) >= n else trail[-1]
                q.credits = credits if any(credits) else None
        self.remove(name, expired)
        if dead:
            for m in dead:
                system = {**m.system, DLQ_SOURCE_ARN: SOURCE_ARN}
                copy = Msg(m.id, self.next_seq, m.body, m.sent, now, READY, m.level, None, m.rc, None, system)
                self.next_seq += 1
                self.add(DLQ, copy)
            self.remove(name, [m.seq for m in dead])
        for m in picked:
            m.rc += 1
            self.hold(name, m, now + vis * 1000)
        if name == FIFO and picked:
            for m in picked:
                if m.attempt is not None and m.attempt != attempt:
                    self.forget_attempt(q, m.attempt)
            if attempt is not None:
                self.forget_attempt(q, attempt)
                q.attempts[attempt] = (now, [m.seq for m in picked])
                for m in picked:
                    m.attempt = attempt
            for old, (ts, _) in list(q.attempts.items()):
                if ts <= now - RECEIVE_ATTEMPT_WINDOW_MS:
                    self.forget_attempt(q, old)
        return [(m.id, m.rc, m.body) for m in picked]

    def replayable(self, q: Queue, attempt: str, now: int) -> list[Msg] | None:
        known = q.attempts.get(attempt)
        if known is None or known[0] <= now - RECEIVE_ATTEMPT_WINDOW_MS:
            return None
        out = []
        for seq in known[1]:
            m = q.msgs.get(seq)
            if m is None or m.attempt != attempt:
                return None
            out.append(m)
        return out

    def pick_fifo(self, q: Queue, n: int, cutoff: int) -> tuple[list[Msg], list[int]]:
        groups: dict[str, list[Msg]] = {}
        for seq in sorted(q.msgs):
            groups.setdefault(q.msgs[seq].group or "", []).append(q.msgs[seq])
        ready = sorted(
            ((ms[0].visible_at, ms[0].rc > 0, ms[0].seq), name) for name, ms in groups.items() if ms[0].state == READY
        )
        picked: list[Msg] = []
        expired: list[int] = []
        for _, name in ready:
            if len(picked) >= n:
                break
            for m in groups[name]:
                if m.state != READY:
                    break
                if m.sent <= cutoff:
                    expired.append(m.seq)
                    continue
                picked.append(m)
                if len(picked) >= n:
                    break
        return picked, expired


# --- the histories ------------------------------------------------------------------------------------------

sends = st.tuples(st.just("send"), st.sampled_from((PLAIN, PRIO)), st.integers(1, 10),
                  st.sampled_from((0, 0, 0, 5, 60)), st.sampled_from((0, 0, 1, 2, 4)))
stores = st.tuples(st.just("store"), st.integers(1, 6), st.sampled_from(("a", "b", "c")), st.sampled_from((0, 0, 5)))
polls = st.tuples(st.just("poll"), st.sampled_from(QUEUES), st.integers(1, 10), st.sampled_from((0, 5, 30)),
                  st.booleans(), st.sampled_from((None, None, 3, 8)), st.sampled_from((None, "x", "y")))
ops = st.one_of(
    sends,
    stores,
    polls,
    polls,
    st.tuples(st.just("delete"), st.lists(st.integers(0, 1000), min_size=1, max_size=4)),
    st.tuples(st.just("visibility"), st.lists(st.tuples(st.integers(0, 1000), st.sampled_from((0, 3, 60))),
                                              min_size=1, max_size=3)),
    st.tuples(st.just("purge"), st.sampled_from(QUEUES)),
    st.tuples(st.just("advance"), st.sampled_from((1, 4, 31, 31, 120, 301))),
    st.tuples(st.just("stats"), st.sampled_from(QUEUES)),
    st.tuples(st.just("peek"), st.sampled_from(QUEUES), st.integers(1, 10)),
)
histories = st.tuples(
    st.lists(st.one_of(sends, stores), min_size=2, max_size=6), st.lists(ops, min_size=20, max_size=80)
).map(lambda parts: parts[0] + parts[1])


class Run:
    """One history: the engine, the model, and the receipt handles handed out so far."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.records: list[Record] = []
        self.engine = Engine(self.clock, RECEIPT_KEY, on_record=self.records.append)
        self.model = Model()
        self.handles: list[tuple[str, str]] = []
        self.counter = 0

    def now(self) -> int:
        return self.engine.now_ms()

    def step(self, op: tuple[Any, ...]) -> None:
        getattr(self, f"do_{op[0]}")(*op[1:])

    def do_send(self, queue: str, k: int, delay: int, level: int) -> None:
        now, model = self.now(), self.model
        if self.engine.partition.queues.get(queue) is not None:
            model.expire(queue, now)
        batch = []
        for _ in range(k):
            self.counter += 1
            body = f"b{self.counter}"
            system = {SYSTEM_KEY: level} if level else {}
            batch.append([f"id-{self.counter}", body, {}, f"md5-{body}", None, delay, system])
            model.add(queue, Msg(f"id-{self.counter}", model.next_seq, body, now, now + delay * 1000,
                                 DELAYED if delay else READY, level, None, 0, None, system))
            model.next_seq += 1
        self.engine.send(queue, batch, RETENTION)

    def do_store(self, k: int, group: str, delay: int) -> None:
        now, model = self.now(), self.model
        if self.engine.partition.queues.get(FIFO) is not None and FIFO in model.queues:
            model.expire(FIFO, now)
        batch = []
        for _ in range(k):
            self.counter += 1
            body = f"b{self.counter}"
            batch.append(fifo_message(group, body, message_id=f"id-{self.counter}", delay=delay))
            model.add(FIFO, Msg(f"id-{self.counter}", model.next_seq, body, now, now + delay * 1000,
                                DELAYED if delay else READY, 0, group))
            model.next_seq += 1
        results = self.engine.store(FIFO, batch, RETENTION, fifo=True)
        assert [r[3] for r in results] == [False] * k

    def do_poll(self, queue: str, n: int, vis: int, redrive: bool, max_in_flight: int | None,
                attempt: str | None) -> None:
        now = self.now()
        levels = PRIO_LEVELS if queue == PRIO else 1
        use_redrive = redrive and queue == PLAIN
        attempt = attempt if queue == FIFO else None
        try:
            expected = self.model.poll(queue, now, n, vis, levels=levels, redrive=use_redrive,
                                       max_in_flight=max_in_flight, attempt=attempt)
        except OverLimit:
            expected = None
        try:
            polled = self.engine.poll(queue, n, vis, RETENTION, attempt_id=attempt,
                                      redrive=REDRIVE if use_redrive else None, max_in_flight=max_in_flight,
                                      priority_levels=levels)
        except OverLimit:
            assert expected is None, "refused a receive the model allows"
            return
        rows = as_dicts(polled.rows)
        assert [(r["id"], r["receive_count"], r["body"]) for r in rows] == expected
        assert polled.dead_letters == []
        self.handles.extend((queue, r["receipt"]) for r in rows)

    def _handle(self, i: int) -> tuple[str, str]:
        if not self.handles or i % 7 == 6:
            return (PLAIN, "not-a-handle")
        return self.handles[i % len(self.handles)]

    def do_delete(self, picks: list[int]) -> None:
        queue = self._handle(picks[0])[0]
        handles = [h for h in (self._handle(i) for i in picks) if h[0] == queue]
        now, model = self.now(), self.model
        q = model.q(queue)
        if queue == FIFO:
            model.release(queue, now)
        expected: list[str | None] = []
        doomed: list[int] = []
        for _, handle in handles:
            receipt = self.engine.receipts.decode(handle)
            if receipt is None:
                expected.append(BAD_HANDLE)
                continue
            m = q.msgs.get(receipt.seq)
            if m is not None:
                latest = m.rc == receipt.receive_no
                if queue == FIFO and (not latest or m.state != IN_FLIGHT):
                    expected.append(INVALID)
                    continue
                if latest:
                    doomed.append(m.seq)
            expected.append(None)
        model.remove(queue, doomed)
        got = self.engine.delete(queue, [h for _, h in handles])
        assert [r[0] if r else None for r in got] == expected

    def do_visibility(self, picks: list[tuple[int, int]]) -> None:
        queue = self._handle(picks[0][0])[0]
        entries = [(h, t) for (q, h), t in ((self._handle(i), t) for i, t in picks) if q == queue]
        now, model = self.now(), self.model
        q = model.q(queue)
        model.release(queue, now)
        expected: list[str | None] = []
        changes: list[tuple[Msg, int]] = []
        for handle, timeout in entries:
            receipt = self.engine.receipts.decode(handle)
            m = q.msgs.get(receipt.seq) if receipt is not None else None
            if receipt is None:
                expected.append(BAD_HANDLE)
            elif m is None or (queue == FIFO and m.rc != receipt.receive_no):
                expected.append(INVALID)
            else:
                expected.append(None)
                changes.append((m, now + timeout * 1000))
        for m, until in changes:
            if m.attempt is not None:
                model.forget_attempt(q, m.attempt)
            model.hold(queue, m, until)
        got = self.engine.change_visibility(queue, entries)
        assert [r[0] if r else None for r in got] == expected

    def do_purge(self, queue: str) -> None:
        q = self.model.queues.get(queue)
        if q is not None:
            self.model.queues[queue] = Queue()
        self.engine.purge(queue)

    def do_advance(self, seconds: int) -> None:
        self.clock.advance(seconds)

    def do_stats(self, queue: str) -> None:
        now = self.now()
        if self.engine.partition.queues.get(queue) is not None:
            self.model.release(queue, now)
            self.model.expire(queue, now)
        assert self.engine.stats(queue, RETENTION) == self.model.counts(queue)

    def do_peek(self, queue: str, n: int) -> None:
        expected = self.model.peek(queue, self.now(), n)
        assert [r[0] for r in self.engine.peek(queue, n, RETENTION)] == expected


def _same_answers(engines: list[Engine]) -> None:
    """The engines hold the same state and answer the same requests alike, until every queue is drained."""
    first = engines[0]
    for other in engines[1:]:
        assert other.state() == first.state()
        assert other.meta_state() == first.meta_state()
        assert other.partition.credits_state() == first.partition.credits_state()
        assert (other.next_seq, other.live_bytes) == (first.next_seq, first.live_bytes)
    for queue in QUEUES:
        peeks = [e.peek(queue, 10, RETENTION) for e in engines]
        assert all(p == peeks[0] for p in peeks)
    levels = {PRIO: PRIO_LEVELS}
    for _ in range(40):
        answers = []
        for e in engines:
            polled = [e.poll(q, 10, 30, RETENTION, attempt_id="z" if q == FIFO else None,
                             priority_levels=levels.get(q, 1)) for q in QUEUES]
            answers.append(([p.rows for p in polled], [e.stats(q, RETENTION) for q in QUEUES]))
            for q, p in zip(QUEUES, polled, strict=True):
                e.delete(q, [row[1] for row in p.rows[::2]])
        assert all(a == answers[0] for a in answers)
        if not any(answers[0][0]):
            break
        for e in engines:
            e.clock.advance(31)  # type: ignore[attr-defined]


@given(histories)
@fuzz_settings(ci_examples=150)
def test_the_engine_answers_as_the_model_and_its_records_replay_to_the_same_engine(history: list[tuple]) -> None:
    # given a random history of requests, each answered as the model answers it
    run = Run()
    for op in history:
        run.step(op)
    # when the records it emitted are replayed, and its snapshot is replayed, on clocks at the same time
    replay_clock, snap_clock = ManualClock(run.clock.now()), ManualClock(run.clock.now())
    replayed = Engine.replay(replay_clock, run.records, receipt_key=RECEIPT_KEY)
    snapshot = Engine(snap_clock, RECEIPT_KEY, partition=PartitionState.replay(list(run.engine.snapshot())))
    # then all three hold the same state and answer the same requests alike from here on
    _same_answers([run.engine, replayed, snapshot])


def test_an_engine_restored_from_a_snapshot_serves_priority_levels_as_the_engine_that_wrote_it() -> None:
    # given an engine whose receive left the priority credits uneven, with the served messages still in flight
    run = Run()
    for op in [("send", PRIO, 1, 0, 0), ("send", PRIO, 2, 0, 2), ("poll", PRIO, 2, 5, False, None, None)]:
        run.step(op)
    assert run.engine.partition.credits_state()[PRIO]
    # when an engine is restored from its snapshot (a restart after compaction, a follower sent a snapshot)
    restored = Engine(ManualClock(run.clock.now()), RECEIPT_KEY,
                      partition=PartitionState.replay(list(run.engine.snapshot())))
    # then both pick the same messages from here on, while only level 0 is visible and after the others return
    for engine in (run.engine, restored):
        engine.send(PRIO, [["late", "late", {}, "m", None, 0, {}]], RETENTION)
        engine.poll(PRIO, 1, 30, RETENTION, priority_levels=PRIO_LEVELS)
        engine.clock.advance(6)  # type: ignore[attr-defined]
    _same_answers([run.engine, restored])
