"""The durable core of the stand-in: moto's WSGI app behind a write-ahead journal and snapshots.

Reads run concurrently, as in moto's own server, but never while a mutation is applied to moto (an item is
changed atomically, as DynamoDB does). Mutations of the durable services run one at a time under a write lock,
so journal order is apply order:

1. apply the request to moto;
2. if it succeeded (2xx) and replay would reproduce it, append it to the journal (still under the lock),
   otherwise take a snapshot before answering;
3. release the lock, wait for the journal's group-committed fsync to cover the record, then answer.

As in any group-committed store without read barriers, a concurrent read can see a write a moment before
it is durable; the writer itself is answered only afterwards.

A snapshot needs moto to hold still while it is pickled, so it runs under the write lock and excludes
readers for the pickling only; writing the file and truncating the journal happen with readers back in.
"""

from __future__ import annotations

import io
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from moto.core.request import PRESERVED_HEADER_NAMES_ENVIRON_KEY

from ferrymq.infra.standin import snapshot as snapshots
from ferrymq.infra.standin.classify import Durability, classify, result_needs_snapshot
from ferrymq.infra.standin.journal import Journal, JournalEntry
from ferrymq.infra.standin.layout import JOURNAL_FILE, SNAPSHOT_FILE
from ferrymq.infra.standin.locks import SharedExclusiveLock
from ferrymq.infra.standin.replay_clock import ReplayClock
from ferrymq.private_files import write_private

log = logging.getLogger(__name__)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
T = TypeVar("T")

# The request variables a journal record keeps besides the HTTP_* headers.
_JOURNALED_CGI_KEYS = ("REQUEST_METHOD", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING", "RAW_URI", "REQUEST_URI",
                       "CONTENT_TYPE", "SERVER_PROTOCOL")

DEFAULT_JOURNAL_LIMIT_BYTES = 32 * 1024 * 1024
REPLAY_BUDGET_SECONDS = 1.0
"""A snapshot is taken once replaying the journal at a start after a crash would take about this long: each record
is a request run through moto again, 2.5-5 ms here, so the byte limit alone (some 25,000 control-plane writes, a
few hours of an idle stack's heartbeats and leases) let a start after a power cut spend two minutes on it."""
REPLAY_SECONDS_PER_RECORD = 0.004
"""What replaying one record is taken to cost until a start has measured it over at least
:data:`MEASURED_RECORDS` records."""
MEASURED_RECORDS = 50
SNAPSHOT_COST_FACTOR = 10.0
"""Snapshots hold every write while moto's state is pickled: the journal is let grow to this many times the last
snapshot's duration of replay, and that long passes between two of them, so that snapshots take at most about a
tenth of what they save, and of the time."""
SLOW_SNAPSHOT_SECONDS = 0.1
"""A snapshot that held the writes this long is named in the log."""


@dataclass(frozen=True, slots=True)
class Response:
    status: str
    headers: list[tuple[str, str]]
    body: list[bytes]

    @property
    def ok(self) -> bool:
        return self.status.startswith("2")


def _call(app: WsgiApp, environ: dict[str, Any]) -> Response:
    """Run ``app`` to completion, collecting its response instead of streaming it."""
    captured: dict[str, Any] = {}
    body: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        captured["status"] = status
        captured["headers"] = list(headers)
        return body.append

    result = app(environ, start_response)
    try:
        body.extend(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    return Response(captured["status"], captured["headers"], body)


def _journaled_environ(environ: dict[str, Any], body_length: int) -> dict[str, str]:
    kept = {
        key: value
        for key, value in environ.items()
        if isinstance(value, str) and (key in _JOURNALED_CGI_KEYS or key.startswith("HTTP_"))
    }
    kept["CONTENT_LENGTH"] = str(body_length)
    return kept


def replay_environ(entry: JournalEntry) -> dict[str, Any]:
    """A WSGI environ that presents a journaled request to moto as it first arrived."""
    environ: dict[str, Any] = {
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(entry.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "0",
        "REMOTE_ADDR": "127.0.0.1",
        PRESERVED_HEADER_NAMES_ENVIRON_KEY: dict(entry.preserved_header_names),
    }
    environ.update(entry.environ)
    return environ


class DurableApp:
    """moto's WSGI app behind a write-ahead journal and snapshots kept in ``data_dir``."""

    def __init__(
        self,
        app: WsgiApp,
        data_dir: Path,
        clock: ReplayClock,
        journal_limit_bytes: int = DEFAULT_JOURNAL_LIMIT_BYTES,
        wall_clock: Callable[[], float] = time.time,
        replay_budget_seconds: float = REPLAY_BUDGET_SECONDS,
    ) -> None:
        self._app = app
        self._data_dir = data_dir
        self._clock = clock
        self._journal_limit_bytes = journal_limit_bytes
        self._wall_clock = wall_clock
        self._write_lock = threading.Lock()
        self._gate = SharedExclusiveLock()
        self._journal: Journal | None = None
        self._seq = 0
        self._replay_budget_seconds = replay_budget_seconds
        self.journal_records = 0
        """Records in the journal since the last snapshot: what a start after a crash would replay."""
        self._seconds_per_record = REPLAY_SECONDS_PER_RECORD
        self._snapshot_seconds = 0.0
        self._snapshot_done = 0.0
        """When (``time.monotonic()``) the last snapshot ended."""

    @property
    def snapshot_path(self) -> Path:
        return self._data_dir / SNAPSHOT_FILE

    def recover(self) -> int:
        """Load the snapshot and replay the journal after it; returns how many records were replayed."""
        self._data_dir.mkdir(parents=True, exist_ok=True)
        loaded = snapshots.read(self.snapshot_path)
        snapshot_seq = 0
        if loaded is not None:
            snapshots.restore(loaded)
            snapshot_seq = loaded.seq
        journal, entries = Journal.open(self._data_dir / JOURNAL_FILE)
        self._journal = journal
        self._seq = max(snapshot_seq, entries[-1].seq if entries else 0)
        replayed = 0
        started = time.perf_counter()
        for entry in entries:
            if entry.seq <= snapshot_seq:
                continue
            with self._clock.pinned_at(entry.at):
                response = _call(self._app, replay_environ(entry))
            if not response.ok:
                log.warning("journal record %d replayed with status %s", entry.seq, response.status)
            replayed += 1
        if replayed >= MEASURED_RECORDS:
            self._seconds_per_record = (time.perf_counter() - started) / replayed
        if replayed or journal.size:
            # Start from a compact state so the next start does not replay the same records again.
            with self._write_lock:
                self._snapshot()
        return replayed

    def close(self) -> None:
        """Snapshot and close: the next start then has nothing to replay."""
        with self._write_lock:
            if self._journal is not None:
                self._snapshot()
                self._journal.close()
                self._journal = None

    def handle(self, environ: dict[str, Any], body: bytes) -> Response:
        """Run one request whose ``environ`` lacks only ``wsgi.input``; blocks until it is durable."""
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        durability = classify(environ)
        if durability is Durability.READ:
            with self._gate.shared():
                return _call(self._app, environ)
        return self._apply_mutation(environ, body, durability)

    def with_writes_held(self, look: Callable[[], T]) -> T:
        """Run ``look``, which only reads moto's state, while no write is applied (reads may still run)."""
        with self._write_lock:
            return look()

    def _apply_mutation(self, environ: dict[str, Any], body: bytes, durability: Durability) -> Response:
        journaled_environ = _journaled_environ(environ, len(body))
        preserved_names = dict(environ.get(PRESERVED_HEADER_NAMES_ENVIRON_KEY) or {})
        wait_for_seq = 0
        with self._write_lock:
            journal = self._require_journal()
            applied_at = self._wall_clock()
            # Readers wait while a write is applied: moto changes an item one attribute at a time, and DynamoDB
            # never shows a read half of an UpdateItem (a scan saw a replica set's host without its port).
            with self._gate.exclusive():
                response = _call(self._app, environ)
            if not response.ok:
                return response
            if result_needs_snapshot(durability, response.headers):
                self._snapshot()
                return response
            self._seq += 1
            journal.append(JournalEntry(self._seq, applied_at, journaled_environ, preserved_names, body))
            self.journal_records += 1
            wait_for_seq = self._seq
            if journal.size > self._journal_limit_bytes or self._replay_due():
                self._snapshot()
        journal.sync(wait_for_seq)
        return response

    def _replay_due(self) -> bool:
        """Whether replaying the journal would now take the budget, or ten times the last snapshot when more,
        and ten times the last snapshot has passed since it ended."""
        spent = SNAPSHOT_COST_FACTOR * self._snapshot_seconds
        replay = self.journal_records * self._seconds_per_record
        return replay >= max(self._replay_budget_seconds, spent) and time.monotonic() - self._snapshot_done >= spent

    def _require_journal(self) -> Journal:
        if self._journal is None:
            raise RuntimeError("the stand-in is not recovered or already closed")
        return self._journal

    def _snapshot(self) -> None:
        """Persist all state and empty the journal. Callers hold the write lock."""
        journal = self._require_journal()
        started = time.perf_counter()
        with self._gate.exclusive():
            data = snapshots.dumps(snapshots.capture(self._seq))
        write_private(self.snapshot_path, data)
        journal.truncate(self._seq)
        self.journal_records = 0
        self._snapshot_seconds = time.perf_counter() - started
        self._snapshot_done = time.monotonic()
        log.log(logging.INFO if self._snapshot_seconds >= SLOW_SNAPSHOT_SECONDS else logging.DEBUG,
                "snapshot at record %d: %d bytes, writes held %.0f ms", self._seq, len(data),
                self._snapshot_seconds * 1000)
