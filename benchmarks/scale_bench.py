"""What a large backlog costs the default stack: memory and disk per message, rates against an empty queue, restart.

    python benchmarks/scale_bench.py --messages 300000

Starts ``ferrymq up`` (three workers, RF 3, SSE on, one partition so the whole backlog sits on one replica set)
in a temporary data directory, on loopback only. Then it:

1. measures SendMessageBatch and ReceiveMessage + DeleteMessageBatch rates on an empty queue;
2. fills a second queue with ``--messages`` messages of ``--body-bytes`` (batches of 10, ``--connections``
   connections) and prints each worker's RSS growth and the log bytes on disk, per message;
3. measures the same rates beside that backlog;
4. replaces a follower's copy of the partition by an empty one (the worker stopped, its directory removed, the
   worker killed and restarted by ``up``) and prints how fast it catches up from the leader's log, in MB/s of log,
   and the worst event-loop stall each worker saw meanwhile;
5. kills the whole stack at once (SIGKILL to every process, as a power cut), starts it again, and prints the time
   until it answers a receive on the backlog: each worker starts from the last checkpoint it took while serving;
6. stops the stack (SIGTERM), starts it again, and prints the same: each worker starts from the checkpoint its
   clean stop wrote. Both with the worst stall of the recovery, what each worker replayed before serving, and how
   long the check of the sealed segments it took on its checkpoint's word took after the start.

After each phase it prints the longest event-loop stall any worker logged during it (each stall of 50 ms or more is
logged), with where the loop's thread was meanwhile as the kernel counts it: on a CPU (the worker's own work),
waiting for a CPU (the machine's two cores busy with the load, the other workers and the client) or asleep (the GIL,
a blocking call, pages read back from disk). The last lines list every phase's.

It asserts nothing: what it finds, it prints. Every loop is bounded in count and time. The issue's targets
(docs/design/storage-at-scale.md): ≤ 150 B RSS per message, restart ≤ 5 s per million, rates within 20 %,
catch-up ≥ 50 MB/s, no stall over 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from soak import bytes_under, rss_bytes, stack_processes, stop_stack_on_sigterm, wait_until_quiet
from sqs_bench import Connection, Target, call

from ferrymq.infra.up_process import UpProcess, ferrymq_command, up_environment
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.body_refs import body_items
from ferrymq.storage.log.format import ENGINE_FLAGS, decode_header, scan_frames
from ferrymq.storage.log.segments import list_segments, segment_path

FILL_DEADLINE_SECONDS = 3600.0
"""The fill gives up after this long, whatever it reached."""


def start_stack(data_dir: Path) -> tuple[UpProcess, float]:
    """The stack, started, and how long it took to say it is ready."""
    env = up_environment(data_dir)
    env.update({"FERRYMQ_HOST": "127.0.0.1", "FERRYMQ_PARTITIONS": "1"})
    stack = UpProcess(data_dir, env, start_timeout=600.0)
    started = time.monotonic()
    stack.start()
    took = time.monotonic() - started
    assert stack.process is not None
    wait_until_quiet(stack.process.pid)
    return stack, took


def target_of(stack: UpProcess) -> Target:
    if urlsplit(stack.endpoint).hostname not in ("127.0.0.1", "localhost"):
        raise SystemExit(f"refusing a non-loopback endpoint {stack.endpoint}")
    return Target(stack.endpoint, "test", "test", "us-east-1")


def _connection(target: Target) -> Connection:
    url = urlsplit(target.endpoint)
    return Connection(url.hostname or "127.0.0.1", url.port or 80)


async def send_batches(target: Target, queue_url: str, body: str, *, total: int, seconds: float,
                       connections: int) -> int:
    """Batches of 10 until ``total`` messages were sent or ``seconds`` passed; how many were sent."""
    deadline = time.monotonic() + seconds
    sent = 0
    entries = [{"Id": str(i), "MessageBody": body} for i in range(10)]

    async def loop() -> None:
        nonlocal sent
        conn = _connection(target)
        while sent < total and time.monotonic() < deadline:
            sent += 10
            await call(conn, target, "SendMessageBatch", {"QueueUrl": queue_url, "Entries": entries})

    await asyncio.gather(*(loop() for _ in range(connections)))
    return sent


async def receive_delete(target: Target, queue_url: str, *, seconds: float, connections: int) -> float:
    """Messages received and deleted per second, over the time until ``seconds`` passed or the queue ran dry."""
    started = time.monotonic()
    deadline = started + seconds
    moved = 0
    last = started

    async def loop() -> None:
        nonlocal moved, last
        conn = _connection(target)
        while time.monotonic() < deadline:
            got = await call(conn, target, "ReceiveMessage", {"QueueUrl": queue_url, "MaxNumberOfMessages": 10})
            messages = got.get("Messages", [])
            if not messages:
                return
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
            await call(conn, target, "DeleteMessageBatch", {"QueueUrl": queue_url, "Entries": entries})
            moved += len(messages)
            last = time.monotonic()

    await asyncio.gather(*(loop() for _ in range(connections)))
    return moved / max(last - started, 1e-3)


async def create_queue(target: Target, name: str) -> str:
    return (await call(_connection(target), target, "CreateQueue", {"QueueName": name}))["QueueUrl"]


async def rates(target: Target, queue_url: str, body: str, args: argparse.Namespace) -> tuple[float, float]:
    """Messages per second sent, then received and deleted, on ``queue_url``."""
    seconds = args.rate_seconds
    sent = await send_batches(target, queue_url, body, total=10**12, seconds=seconds, connections=args.connections)
    received = await receive_delete(target, queue_url, seconds=seconds, connections=args.connections)
    return sent / seconds, received


RECOVERED = re.compile(r"recovered (\S+)/(worker-\d+)/p\d+: (\d+) records from \d+ segments "
                       r"\(\d+ bytes\) in ([\d.]+) s")
CHECKPOINT_LOADED = re.compile(r"a base and (\d+) deltas, loaded in ([\d.]+ s: [^)]*)\)")
SEALED_CHECKED = re.compile(r"(\d+) sealed segments \((\d+) bytes\) checked against the checkpoint's CRC-32s after "
                            r"the start, in ([\d.]+) s")


class Phases:
    """The stack's log, read one phase at a time for the event-loop stalls the workers logged during it."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self._offset = log_path.stat().st_size if log_path.exists() else 0
        self.worst: list[tuple[str, dict | None, int]] = []
        """(phase, its longest stall or None, how many of 100 ms or more), in order."""

    def end(self, phase: str) -> None:
        """Print the longest stall logged since the last phase ended, and keep it for :meth:`summary`."""
        with open(self.log_path, "rb") as f:
            f.seek(self._offset)
            lines = f.read()
        self._offset += len(lines)
        stalls = []
        for line in lines.splitlines():
            if b'"held_ms"' in line:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if "held_ms" in entry:
                    stalls.append(entry)
        worst = max(stalls, key=lambda s: s["held_ms"], default=None)
        past_goal = sum(s["held_ms"] >= 100 for s in stalls)
        self.worst.append((phase, worst, past_goal))
        say(f"    longest event-loop stall: {describe_stall(worst, past_goal)}")

    def summary(self) -> None:
        say("longest event-loop stall of each phase:")
        for phase, worst, past_goal in self.worst:
            say(f"  {phase}: {describe_stall(worst, past_goal)}")


def describe_stall(stall: dict | None, past_goal: int) -> str:
    if stall is None:
        return "none of 50 ms or more"
    return (f"{stall.get('worker', '?')} {stall['held_ms']} ms (its thread {stall['on_cpu_ms']} ms on a CPU, "
            f"{stall['waiting_for_cpu_ms']} ms waiting for one, {stall['asleep_ms']} ms asleep, "
            f"{stall.get('page_faults', 0)} pages read back from disk); "
            f"{past_goal} of 100 ms or more")


def start_answering(stack: UpProcess, queue_url: str) -> float:
    """Start the stopped stack; the seconds until it answers a receive on ``queue_url``.  Prints what each worker
    replayed, from the stack's log, and waits for the checks of sealed segments the workers took on trust."""
    log_path = stack.log_path
    before = log_path.stat().st_size if log_path.exists() else 0
    started = time.monotonic()
    stack.start()
    asyncio.run(first_answer(target_of(stack), queue_url, timeout=600.0))
    took = time.monotonic() - started

    def since_start() -> str:
        with open(log_path, errors="replace") as f:
            f.seek(before)
            return f.read()

    lines = since_start()
    for deltas, account in CHECKPOINT_LOADED.findall(lines):
        say(f"    a checkpoint (a base and {deltas} deltas) loaded in {account}")
    for _, worker, records, seconds in RECOVERED.findall(lines):
        say(f"    {worker} replayed {int(records):,} records in {float(seconds):.2f} s before serving")
    # Sealed segments a checkpoint vouched for are checked after the start: wait for those checks to be told.
    expected = lines.count("starting from the checkpoint")
    deadline = time.monotonic() + 300
    while len(SEALED_CHECKED.findall(lines)) < expected and time.monotonic() < deadline:
        time.sleep(1)
        lines = since_start()
    for count, size, seconds in SEALED_CHECKED.findall(lines):
        say(f"    {int(count)} sealed segments ({int(size) / 2**20:,.0f} MiB) checked after the start, in "
            f"{float(seconds):.1f} s")
    return took


def cluster_status(stack: UpProcess) -> dict:
    done = subprocess.run([*ferrymq_command(), "cluster", "status", "--json"], env=stack.env, capture_output=True,
                          text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def catch_up(stack: UpProcess, data_dir: Path, timeout: float) -> tuple[float, int]:
    """A follower's copy of the partition replaced by an empty one; returns the seconds until it is back in the
    in-sync set, and the log bytes it then holds."""
    assert stack.process is not None
    part = cluster_status(stack)["partitions"][0]
    victim = next(r for r in part["replicas"] if r != part["leader"])
    pid = stack_processes(stack.process.pid)[victim]
    log_path = stack.log_path
    before = log_path.stat().st_size
    os.kill(pid, signal.SIGSTOP)
    shutil.rmtree(data_dir / "workers" / victim / "p0")
    os.kill(pid, signal.SIGKILL)
    started = time.monotonic()
    # The leader says when the victim is back in the in-sync set; with a small backlog it may leave and come back
    # between two looks at the cluster's status.
    while time.monotonic() - started < timeout:
        with open(log_path, errors="replace") as f:
            f.seek(before)
            if any("partition 0: " in line and victim in line and "back in the in-sync set" in line for line in f):
                took = time.monotonic() - started
                return took, bytes_under(data_dir / "workers" / victim / "p0")
        time.sleep(0.2)
    raise SystemExit(f"{victim} did not catch up within {timeout:.0f} s")


def envelope_bytes(directory: Path) -> float:
    """The mean size of the message bodies as stored (encrypted envelopes, with SSE) in the newest segment of the
    log in ``directory``: what the log's bytes per message compare with."""
    newest = segment_path(directory, list_segments(directory)[-1])
    data = newest.read_bytes()
    header = decode_header(data)
    sizes = [len(item[at]) for frame in scan_frames(data, header.size, header.version) if frame.flags in ENGINE_FLAGS
             for item, at in body_items(codec.decode(frame.payload))]
    return sum(sizes) / max(len(sizes), 1)


def worker_rss(stack: UpProcess) -> dict[str, int]:
    assert stack.process is not None
    found = stack_processes(stack.process.pid)
    return {name: rss_bytes(pid) or 0 for name, pid in found.items() if name.startswith("worker")}


async def first_answer(target: Target, queue_url: str, timeout: float) -> None:
    """Return once a receive on ``queue_url`` answers with a message."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = await call(_connection(target), target, "ReceiveMessage",
                             {"QueueUrl": queue_url, "VisibilityTimeout": 0, "WaitTimeSeconds": 1})
        except (OSError, RuntimeError):
            await asyncio.sleep(0.05)
            continue
        if got.get("Messages"):
            return
    raise SystemExit("the restarted stack did not answer a receive on the backlog")


def say(line: str) -> None:
    """Print a figure as soon as it is measured: a later phase that fails does not take it along."""
    print(line, flush=True)


def run(args: argparse.Namespace) -> None:
    body = "x" * args.body_bytes
    with tempfile.TemporaryDirectory(prefix="ferrymq-scale-") as tmp:
        data_dir = Path(tmp) / "data"
        stack, empty_start = start_stack(data_dir)
        phases = Phases(stack.log_path)
        try:
            target = target_of(stack)
            empty_url = asyncio.run(create_queue(target, "scale-empty"))
            empty_send, empty_recv = asyncio.run(rates(target, empty_url, body, args))
            say(f"empty queue: send (batches of 10) {empty_send:,.0f} msg/s, receive + delete {empty_recv:,.0f} msg/s")
            phases.end("rates on an empty queue")
            backlog_url = asyncio.run(create_queue(target, "scale-backlog"))
            rss_before = worker_rss(stack)
            disk_before = bytes_under(data_dir / "workers")
            started = time.monotonic()
            # Filled in two halves: the second half's growth is what one more message costs, without what is
            # paid once (the body cache filling up to its limit, buffers reaching their working size).
            half = asyncio.run(send_batches(target, backlog_url, body, total=args.messages // 2,
                                            seconds=FILL_DEADLINE_SECONDS, connections=args.connections))
            rss_half = worker_rss(stack)
            filled = half + asyncio.run(send_batches(target, backlog_url, body, total=args.messages - half,
                                                     seconds=FILL_DEADLINE_SECONDS, connections=args.connections))
            fill_seconds = time.monotonic() - started
            rss_after = worker_rss(stack)
            disk_after = bytes_under(data_dir / "workers")
            envelope = envelope_bytes(next((data_dir / "workers").iterdir()) / "p0")
            say(f"backlog: {filled:,} messages of {args.body_bytes} B, filled in {fill_seconds:.1f} s "
                f"({filled / fill_seconds:,.0f} msg/s)")
            phases.end("fill (compactions and checkpoints)")
            for name in sorted(rss_after):
                grew = rss_after[name] - rss_before.get(name, 0)
                marginal = (rss_after[name] - rss_half.get(name, 0)) / max(filled - half, 1)
                say(f"  {name}: RSS +{grew / 2**20:,.1f} MiB = {grew / filled:,.0f} B per message; "
                    f"{marginal:,.0f} B per message over the second half")
            per_message = (disk_after - disk_before) / filled / 3
            say(f"  logs on disk (all workers, checkpoints included): +{(disk_after - disk_before) / 2**20:,.1f} MiB "
                f"= {per_message:,.0f} B per message and replica, {per_message / envelope:.2f} times the body as "
                f"stored ({envelope:,.0f} B)")
            full_send, full_recv = asyncio.run(rates(target, backlog_url, body, args))
            say(f"  send (batches of 10):   empty {empty_send:,.0f} msg/s, with backlog {full_send:,.0f} msg/s "
                f"({full_send / empty_send:.0%})")
            say(f"  receive + delete:       empty {empty_recv:,.0f} msg/s, with backlog {full_recv:,.0f} msg/s "
                f"({full_recv / max(empty_recv, 1):.0%})")
            phases.end("rates beside the backlog")
            seconds, caught_up = catch_up(stack, data_dir, timeout=1800.0)
            say(f"  catch-up of an emptied follower: {caught_up / 2**20:,.0f} MiB of log in {seconds:.1f} s "
                f"= {caught_up / 1e6 / seconds:,.1f} MB/s (until back in the in-sync set)")
            phases.end("catch-up (a base copied, then the log)")
            stack.kill9_all()
            seconds = start_answering(stack, backlog_url)
            say(f"  start to answering after a power cut: {seconds:.1f} s with {filled:,} messages "
                f"(an empty stack took {empty_start:.1f} s to start)")
            phases.end("start after a power cut (recovery, then the sealed segments' check)")
            stack.stop()
            seconds = start_answering(stack, backlog_url)
            say(f"  start to answering after a clean stop: {seconds:.1f} s")
            phases.end("start after a clean stop")
            phases.summary()
        finally:
            stack.stop()
            if args.log is not None:
                shutil.copyfile(stack.log_path, args.log)


def main(argv: list[str] | None = None) -> int:
    stop_stack_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--body-bytes", type=int, default=256)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rate-seconds", type=float, default=5.0)
    parser.add_argument("--log", type=Path, help="keep the stack's log here (with FERRYMQ_WORKER_STALL_TRACE_MS "
                        "set, it holds the stack of every thread of each stall past that threshold)")
    args = parser.parse_args(argv)
    if args.messages < 10:
        parser.error("--messages must be at least 10")
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
