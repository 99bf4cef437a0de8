"""Soak the whole local stack with queue and message churn and print its memory and disk, minute by minute.

    python benchmarks/soak.py --minutes 10

Starts ``ferrymq up`` (own stand-in, ``FERRYMQ_PORT=0``, a temporary ``FERRYMQ_DATA_DIR``), then from this one
process, with boto3 on 127.0.0.1 only, churns for ``--minutes``: creates standard and FIFO queues and deletes
them (with messages still in them), sends and receives+deletes messages, resends FIFO messages with the
same deduplication id as a client's retry would, and purges.  At the start and at each minute it prints one
row: the RSS of every storage worker, of the gateway and of the AWS stand-in (``/proc/<pid>/status``), the
queues alive (ListQueues), messages sent so far, and the bytes of the workers' logs on disk.  At the end it
prints how much each process grew from minute 1 to the last minute, stops the stack with SIGTERM and exits 0.

It asserts nothing: what it finds, it prints.  Every loop is bounded in count and time.  It starts and stops
``ferrymq up`` with ``ferrymq.infra.up_process``, as the end-to-end tests do, so that it runs without the test tree.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ferrymq.infra.up_process import UpProcess, up_environment

_TICK = os.sysconf("SC_CLK_TCK")

REGION = "us-east-1"
# The development credential `ferrymq up` seeds.
ACCESS_KEY = SECRET_KEY = "test"

BODY = "x" * 1024
ROUND_REQUEST_CAP = 200
"""No churn round makes more requests than this, whatever the stack answers."""
MAX_LIST_PAGES = 50


# --- the stack ---------------------------------------------------------------------------------------------


def start_stack(data_dir: Path, partitions: int) -> UpProcess:
    """``ferrymq up`` on loopback with ``partitions`` partitions; its output goes to ``<data dir>/up.log``."""
    env = up_environment(data_dir)
    env.update({"FERRYMQ_HOST": "127.0.0.1", "FERRYMQ_PARTITIONS": str(partitions)})
    stack = UpProcess(data_dir, env)
    stack.start()
    return stack


# --- what is measured ---------------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found.extend(int(x) for x in (task / "children").read_text().split())
    return sorted(set(found))


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def stack_processes(up_pid: int) -> dict[str, int]:
    """The stack's processes by name (``worker-<n>``, ``gateway``, ``aws``, ``push-<n>``), found as children of
    ``up``."""
    named: dict[str, int] = {}
    for pid in _children(up_pid):
        argv = _cmdline(pid)
        if "ferrymq.storage" in argv:
            worker_id = argv[argv.index("--worker-id") + 1] if "--worker-id" in argv[:-1] else f"worker-pid{pid}"
            named[worker_id] = pid
        elif "ferrymq.infra.gateway" in argv:
            # Several gateway processes on one port (FERRYMQ_GATEWAY_PROCESSES) are gateway, gateway-2, ...
            gateways = sum(n == "gateway" or n.startswith("gateway-") for n in named)
            named["gateway" if gateways == 0 else f"gateway-{gateways + 1}"] = pid
        elif "ferrymq.infra.standin" in argv:
            named["aws"] = pid
        elif "ferrymq.frontend.push" in argv:
            named[f"push-{sum(n.startswith('push-') for n in named)}"] = pid
    return dict(sorted(named.items(), key=lambda kv: (not kv[0].startswith("gateway"), kv[0] != "aws", kv[0])))


def own_cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid``, with those of the children it has waited for (``/proc/<pid>/stat``): a worker's
    checkpoints are written by children it forks and reaps, and are its cost; not those of its live children, which
    are processes of their own (``up``'s). 0 for a process that is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / _TICK
    except (OSError, ValueError, IndexError):
        return 0.0


def wait_until_quiet(up_pid: int, *, below: float = 0.05, within: float = 30.0) -> float:
    """Wait until the stack's processes together spend less than ``below`` of one core over half a second (up
    prints READY before its push hosts finish starting, and their start-up would be counted against the first
    scenario), at most ``within`` seconds; the seconds waited."""

    def spent() -> float:
        return sum(own_cpu_seconds(pid) for pid in stack_processes(up_pid).values())

    started = time.monotonic()
    while time.monotonic() - started < within:
        before = spent()
        time.sleep(0.5)
        if spent() - before < below * 0.5:
            break
    return time.monotonic() - started


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def bytes_under(directory: Path) -> int:
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, name)).st_size
    return total


# --- the churn ---------------------------------------------------------------------------------------------


@dataclass
class Counts:
    created: int = 0
    deleted: int = 0
    sent: int = 0
    received: int = 0
    fifo_retries: int = 0
    """FIFO sends repeated with the same deduplication id."""
    retries_deduplicated: int = 0
    """Of those, how many got the first send's MessageId back (SQS's answer to a retry in the window)."""
    purged: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def error(self, exc: Exception) -> None:
        code = exc.response.get("Error", {}).get("Code", "?") if isinstance(exc, ClientError) else type(exc).__name__
        self.errors[code] = self.errors.get(code, 0) + 1


@dataclass
class QueuePair:
    standard: str
    fifo: str
    purged: bool = False


class Churn:
    """One round at a time of queue and message churn against the stack, counting what it did."""

    def __init__(self, sqs: Any, run: str, *, pool_size: int, delete_every: int) -> None:
        self.sqs = sqs
        self.prefix = f"soak-{run}-"
        self.pool_size = pool_size
        self.delete_every = delete_every
        self.pairs: list[QueuePair] = []
        self.counts = Counts()
        self.rounds = 0
        self._serial = 0
        self._requests = 0

    def _call(self, fn: Callable[..., Any], **kwargs: Any) -> Any:
        """One request, its failure counted instead of raised; None when it failed or the round's cap is hit."""
        if self._requests >= ROUND_REQUEST_CAP:
            return None
        self._requests += 1
        try:
            return fn(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            self.counts.error(exc)
            return None

    def round(self) -> None:
        self._requests = 0
        self.rounds += 1
        if len(self.pairs) < self.pool_size:
            self._create_pair()
        if not self.pairs:
            return
        pair = self.pairs[self.rounds % len(self.pairs)]
        self._standard_traffic(pair.standard)
        self._fifo_traffic(pair.fifo)
        if self.rounds % self.delete_every == 0:
            self._purge_one()
            self._delete_oldest()

    def _create_pair(self) -> None:
        self._serial += 1
        standard = self._call(self.sqs.create_queue, QueueName=f"{self.prefix}s{self._serial}")
        fifo = self._call(self.sqs.create_queue, QueueName=f"{self.prefix}f{self._serial}.fifo",
                          Attributes={"FifoQueue": "true"})
        self.counts.created += (standard is not None) + (fifo is not None)
        if standard is not None and fifo is not None:
            self.pairs.append(QueuePair(standard["QueueUrl"], fifo["QueueUrl"]))

    def _standard_traffic(self, url: str) -> None:
        entries = [{"Id": str(i), "MessageBody": BODY} for i in range(10)]
        sent = self._call(self.sqs.send_message_batch, QueueUrl=url, Entries=entries)
        if sent is not None:
            self.counts.sent += len(sent.get("Successful", []))
        self._drain(url, rounds=3)

    def _fifo_traffic(self, url: str) -> None:
        first_ids: dict[tuple[str, str], str] = {}
        for i in range(4):
            group, dedup = f"g{i % 2}", f"d{self.rounds}-{i}"
            sent = self._call(self.sqs.send_message, QueueUrl=url, MessageBody=BODY, MessageGroupId=group,
                              MessageDeduplicationId=dedup)
            if sent is not None:
                self.counts.sent += 1
                first_ids[group, dedup] = sent["MessageId"]
        # A client that lost the answers sends the same messages again with the same deduplication ids.
        for (group, dedup), message_id in first_ids.items():
            again = self._call(self.sqs.send_message, QueueUrl=url, MessageBody=BODY, MessageGroupId=group,
                               MessageDeduplicationId=dedup)
            self.counts.fifo_retries += 1
            if again is not None and again.get("MessageId") == message_id:
                self.counts.retries_deduplicated += 1
        self._drain(url, rounds=4)

    def _drain(self, url: str, *, rounds: int) -> None:
        for _ in range(rounds):
            got = self._call(self.sqs.receive_message, QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
            messages = (got or {}).get("Messages", [])
            if not messages:
                return
            self.counts.received += len(messages)
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
            self._call(self.sqs.delete_message_batch, QueueUrl=url, Entries=entries)

    def _purge_one(self) -> None:
        """Purge a standard queue never purged before (SQS allows one purge a minute), with messages in it."""
        for pair in self.pairs:
            if not pair.purged:
                entries = [{"Id": str(i), "MessageBody": BODY} for i in range(10)]
                sent = self._call(self.sqs.send_message_batch, QueueUrl=pair.standard, Entries=entries)
                if sent is not None:
                    self.counts.sent += len(sent.get("Successful", []))
                if self._call(self.sqs.purge_queue, QueueUrl=pair.standard) is not None:
                    self.counts.purged += 1
                pair.purged = True
                return

    def _delete_oldest(self) -> None:
        """Delete the oldest pair, leaving messages in both queues: their worker has to drop them."""
        pair = self.pairs.pop(0)
        entries = [{"Id": str(i), "MessageBody": BODY} for i in range(10)]
        sent = self._call(self.sqs.send_message_batch, QueueUrl=pair.standard, Entries=entries)
        if sent is not None:
            self.counts.sent += len(sent.get("Successful", []))
        fifo = self._call(self.sqs.send_message, QueueUrl=pair.fifo, MessageBody=BODY, MessageGroupId="left",
                          MessageDeduplicationId=f"left-{self.rounds}")
        if fifo is not None:
            self.counts.sent += 1
        for url in (pair.standard, pair.fifo):
            if self._call(self.sqs.delete_queue, QueueUrl=url) is not None:
                self.counts.deleted += 1

    def queues_alive(self) -> int | None:
        """Queues of this run the stack lists, across pages."""
        total = 0
        kwargs: dict[str, Any] = {"QueueNamePrefix": self.prefix, "MaxResults": 1000}
        for _ in range(MAX_LIST_PAGES):
            try:
                page = self.sqs.list_queues(**kwargs)
            except (ClientError, BotoCoreError) as exc:
                self.counts.error(exc)
                return None
            total += len(page.get("QueueUrls", []))
            if "NextToken" not in page:
                return total
            kwargs["NextToken"] = page["NextToken"]
        return total


# --- the report --------------------------------------------------------------------------------------------


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.1f}"


@dataclass
class Row:
    minute: int
    """0 at the start; the last row of a run whose length is not a whole number of rows gets the next number."""
    elapsed: float
    queues: int | None
    log_bytes: int
    rss: dict[str, int | None]


class Report:
    def __init__(self, processes: dict[str, int], out: TextIO, *, unit: str = "minute") -> None:
        self.processes = processes
        self.out = out
        self.unit = unit
        """What a row stands for: a minute, unless --report-seconds says otherwise."""
        self.rows: list[Row] = []
        self._columns = [f"{name} MiB" for name in processes]

    def header(self) -> None:
        names = " ".join(f"{c:>14}" for c in self._columns)
        print(f"{self.unit[:3]:>3} {'elapsed s':>9} {'queues':>6} {'created':>7} {'deleted':>7} {'sent':>8} "
              f"{'received':>8} {'errors':>6} {'log MiB':>8} {names}", file=self.out, flush=True)

    def add(self, minute: int, elapsed: float, queues: int | None, counts: Counts, log_bytes: int) -> None:
        rss = {name: rss_bytes(pid) for name, pid in self.processes.items()}
        self.rows.append(Row(minute, elapsed, queues, log_bytes, rss))
        sizes = " ".join(f"{_mib(rss[name]):>14}" for name in self.processes)
        queues_text = "-" if queues is None else str(queues)
        print(f"{minute:>3} {elapsed:>9.1f} {queues_text:>6} {counts.created:>7} {counts.deleted:>7} "
              f"{counts.sent:>8} {counts.received:>8} {sum(counts.errors.values()):>6} "
              f"{log_bytes / 2**20:>8.2f} {sizes}", file=self.out, flush=True)

    def summary(self, churn: Churn) -> None:
        counts = churn.counts
        print(f"\n{churn.rounds} churn rounds; FIFO retries {counts.fifo_retries}, answered with the first send's "
              f"MessageId {counts.retries_deduplicated}; purges {counts.purged}", file=self.out)
        if counts.errors:
            listed = ", ".join(f"{code} {n}" for code, n in sorted(counts.errors.items()))
            print(f"errors by code: {listed}", file=self.out)
        by_minute = [r for r in self.rows if r.minute >= 1]
        if not by_minute:
            print("no minute completed: no RSS growth to report", file=self.out, flush=True)
            return
        first, last, start = by_minute[0], by_minute[-1], self.rows[0]
        unit = self.unit
        print(f"\nRSS growth, {unit} {first.minute} -> {unit} {last.minute} (and start -> {unit} {last.minute}):",
              file=self.out)
        for name in self.processes:
            a, b, s = first.rss.get(name), last.rss.get(name), start.rss.get(name)
            if a is None or b is None:
                print(f"  {name:<12} process gone", file=self.out)
                continue
            since_start = "-" if s is None else f"{(b - s) / 2**20:+.1f} MiB"
            print(f"  {name:<12} {(b - a) / 2**20:+8.1f} MiB ({since_start})", file=self.out)
        print(f"  {'worker logs':<12} {(last.log_bytes - first.log_bytes) / 2**20:+8.2f} MiB on disk", file=self.out,
              flush=True)


# --- putting it together -----------------------------------------------------------------------------------


def _loopback_only(endpoint: str) -> None:
    host = urlsplit(endpoint).hostname
    if host != "127.0.0.1":
        raise SystemExit(f"the stack answered at {endpoint}, not on 127.0.0.1; refusing to talk to it")


def _sqs_client(endpoint: str) -> Any:
    config = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2, "mode": "standard"})
    return boto3.client("sqs", endpoint_url=endpoint, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, config=config)


@contextlib.contextmanager
def _data_dir(keep: bool) -> Iterator[Path]:
    if keep:
        path = Path(tempfile.mkdtemp(prefix="ferrymq-soak-"))
        print(f"data directory {path} (kept)")
        yield path
    else:
        with tempfile.TemporaryDirectory(prefix="ferrymq-soak-") as name:
            yield Path(name)


def soak(args: argparse.Namespace, out: TextIO) -> int:
    with _data_dir(args.keep_data) as data_dir:
        stack = start_stack(data_dir / "stack", args.partitions)
        try:
            _loopback_only(stack.endpoint)
            assert stack.process is not None
            processes = stack_processes(stack.process.pid)
            print(f"ferrymq up at {stack.endpoint}; {args.partitions} partition(s); processes "
                  + ", ".join(f"{name} {pid}" for name, pid in processes.items())
                  + f"; churning for {args.minutes:g} minute(s)", file=out, flush=True)
            churn = Churn(_sqs_client(stack.endpoint), uuid.uuid4().hex[:6], pool_size=args.pool_size,
                          delete_every=args.delete_every)
            report = Report(processes, out, unit="minute" if args.report_seconds == 60 else "row")
            workers_dir = stack.data_dir / "workers"
            started = time.monotonic()
            deadline = started + args.minutes * 60
            report.header()
            report.add(0, 0.0, churn.queues_alive(), churn.counts, bytes_under(workers_dir))
            minute = 0
            next_report = started + args.report_seconds
            reported_at = started
            while churn.rounds < args.max_rounds:
                now = time.monotonic()
                if now >= next_report:
                    minute += 1
                    report.add(minute, now - started, churn.queues_alive(), churn.counts, bytes_under(workers_dir))
                    next_report += args.report_seconds
                    reported_at = now
                if now >= deadline:
                    break
                churn.round()
            now = time.monotonic()
            if now - reported_at > 1.0:
                # The run ended between rows (a fractional --minutes, or --max-rounds): one more for the end.
                report.add(minute + 1, now - started, churn.queues_alive(), churn.counts, bytes_under(workers_dir))
            report.summary(churn)
        finally:
            status = stack.stop()
        print(f"stack stopped (ferrymq up exited with {status})", file=out, flush=True)
    return 0


def stop_stack_on_sigterm() -> None:
    """A benchmark told to stop (``timeout``, a CI job's end) leaves through its ``finally`` blocks, which stop the
    stack it started: that stack runs in a session of its own, and a plain SIGTERM would leave it running."""
    signal.signal(signal.SIGTERM, lambda signum, _: sys.exit(128 + signum))


def main(argv: list[str] | None = None) -> int:
    stop_stack_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to churn (default 10)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions the stack serves (default 2)")
    parser.add_argument("--pool-size", type=int, default=16, help="queue pairs alive at most (default 16)")
    parser.add_argument("--delete-every", type=int, default=5,
                        help="purge one queue and delete the oldest pair every this many rounds (default 5)")
    parser.add_argument("--max-rounds", type=int, default=1_000_000, help="stop after this many rounds anyway")
    parser.add_argument("--report-seconds", type=float, default=60.0, help="seconds between rows (default 60)")
    parser.add_argument("--keep-data", action="store_true", help="keep the data directory for inspection")
    args = parser.parse_args(argv)
    return soak(args, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
