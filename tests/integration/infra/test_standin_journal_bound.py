"""The stand-in's journal holds about a second of replay at most: a start after a crash replays that, not hours of
heartbeats and lease renewals. A snapshot that takes long lets the journal grow in proportion, so that snapshots
cost a tenth of what they save.

Driven in this process through :func:`build_durable_app`, as the stand-in process serves it.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from ferrymq.infra.standin import durable_app, snapshot
from ferrymq.infra.standin.asgi_bridge import dynamodb_environ
from ferrymq.infra.standin.durable_app import (
    REPLAY_BUDGET_SECONDS,
    REPLAY_SECONDS_PER_RECORD,
    SNAPSHOT_COST_FACTOR,
    DurableApp,
)
from ferrymq.infra.standin.journal import Journal
from ferrymq.infra.standin.layout import JOURNAL_FILE
from ferrymq.infra.standin.server import build_durable_app


def _dynamodb(durable: DurableApp, action: str, request: dict[str, Any]) -> None:
    environ = dynamodb_environ(action, region="us-east-1", access_key="test")
    response = durable.handle(environ, json.dumps(request).encode())
    assert response.ok, response.body


def _table(durable: DurableApp) -> str:
    name = f"journal-{uuid.uuid4().hex[:8]}"
    _dynamodb(durable, "CreateTable", {
        "TableName": name, "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
    })
    return name


def _heartbeat(durable: DurableApp, table: str, i: int) -> None:
    _dynamodb(durable, "UpdateItem", {
        "TableName": table, "Key": {"pk": {"S": f"worker-{i % 3}"}},
        "UpdateExpression": "SET #h = :h", "ExpressionAttributeNames": {"#h": "heartbeat_ms"},
        "ExpressionAttributeValues": {":h": {"N": str(i)}},
    })


def _unsynced(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def test_the_journal_never_holds_more_than_about_a_second_of_replay(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # snapshots written without fsync: a busy disk would make them slow, and slow snapshots rightly space them out
    # (the next test)
    monkeypatch.setattr(durable_app, "write_private", _unsynced)
    durable = build_durable_app(tmp_path)
    durable.recover()
    try:
        table = _table(durable)
        bound = round(REPLAY_BUDGET_SECONDS / REPLAY_SECONDS_PER_RECORD)
        most = 0
        # when an idle stack's control plane writes, far less than the journal's byte limit
        for i in range(2 * bound + 10):
            _heartbeat(durable, table, i)
            most = max(most, durable.journal_records)
        # then the journal was snapshotted as it went, never holding more than the budget's records
        assert most <= bound
        _, entries = Journal.open(tmp_path / JOURNAL_FILE)
        assert len(entries) == durable.journal_records <= bound
    finally:
        durable.close()


def test_a_slow_snapshot_is_followed_by_the_next_only_ten_times_its_duration_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a budget of ten records' replay, and snapshots that take 20 ms (50 records' replay, times ten)
    monkeypatch.setattr(durable_app, "write_private", _unsynced)
    budget = 10 * REPLAY_SECONDS_PER_RECORD
    durable = build_durable_app(tmp_path, replay_budget_seconds=budget)
    durable.recover()
    dumps = snapshot.dumps

    def slow_dumps(state: Any) -> bytes:
        time.sleep(0.02)
        return dumps(state)

    try:
        table = _table(durable)
        monkeypatch.setattr(durable_app.snapshots, "dumps", slow_dumps)
        snapshots: list[tuple[int, float]] = []
        for i in range(400):
            before = durable.journal_records
            _heartbeat(durable, table, i)
            if durable.journal_records <= before:
                snapshots.append((before + 1, time.monotonic()))
        # then each snapshot after a slow one comes only once the journal holds ten times its duration of replay,
        # and that long has passed (where the first falls depends on how long the table's own snapshot took, which
        # this test does not set; the budget alone is the test above's)
        _, *rest = snapshots
        slow = round(SNAPSHOT_COST_FACTOR * 0.02 / REPLAY_SECONDS_PER_RECORD)
        assert rest and all(records >= slow for records, _ in rest), snapshots
        ends = [at for _, at in snapshots]
        assert all(later - earlier >= SNAPSHOT_COST_FACTOR * 0.02 for earlier, later in itertools.pairwise(ends)), ends
    finally:
        durable.close()
