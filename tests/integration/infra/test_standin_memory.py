"""The stand-in's memory stays bounded under churn: moto keeps no objects for items and tables it no longer holds.

Driven in this process, through the same :func:`build_durable_app` the stand-in process serves, so that what
moto keeps alive can be counted directly instead of guessed from the process's RSS.
"""

from __future__ import annotations

import gc
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ferrymq.infra.standin.asgi_bridge import dynamodb_environ
from ferrymq.infra.standin.durable_app import DurableApp, Response
from ferrymq.infra.standin.server import build_durable_app

ROUNDS = 150


def _dynamodb(durable: DurableApp, action: str, request: dict[str, Any]) -> Response:
    """One DynamoDB request through the stand-in, built the way its HTTP front builds a client's."""
    environ = dynamodb_environ(action, region="us-east-1", access_key="test")
    return durable.handle(environ, json.dumps(request).encode())


def _live(type_name: str) -> int:
    return sum(
        1
        for obj in gc.get_objects()
        if type(obj).__name__ == type_name and type(obj).__module__.startswith("moto.dynamodb.")
    )


@pytest.fixture
def durable(tmp_path: Path) -> Iterator[DurableApp]:
    app = build_durable_app(tmp_path)
    app.recover()
    yield app
    app.close()


def test_items_and_tables_moto_no_longer_holds_are_freed(durable: DurableApp) -> None:
    # given a table, and the moto items and tables alive before any churn
    table = f"churn-{uuid.uuid4().hex[:8]}"
    created = _dynamodb(
        durable,
        "CreateTable",
        {
            "TableName": table,
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        },
    )
    assert created.ok, created.body
    gc.collect()
    items_before, tables_before = _live("Item"), _live("Table")
    # when items are put, overwritten, refused a conditional put, written in transactions (moto copies the
    # table to roll back) and deleted, round after round, as FIFO dedup and queue records are
    for i in range(ROUNDS):
        dedup = {"pk": {"S": f"dedup-{i}"}, "expires_at": {"N": str(i)}}
        assert _dynamodb(durable, "PutItem", {"TableName": table, "Item": dedup}).ok
        assert _dynamodb(durable, "PutItem", {"TableName": table, "Item": dedup}).ok
        refused = _dynamodb(
            durable, "PutItem", {"TableName": table, "Item": dedup, "ConditionExpression": "attribute_not_exists(pk)"}
        )
        assert not refused.ok
        transaction = {
            "TransactItems": [
                {"Put": {"TableName": table, "Item": {"pk": {"S": "queue"}, "version": {"N": str(i)}}}},
                {"Put": {"TableName": table, "Item": {"pk": {"S": f"tombstone-{i % 5}"}, "version": {"N": str(i)}}}},
            ]
        }
        assert _dynamodb(durable, "TransactWriteItems", transaction).ok
        assert _dynamodb(durable, "DeleteItem", {"TableName": table, "Key": {"pk": {"S": f"dedup-{i}"}}}).ok
    # then the moto objects still alive are the table and the items it holds, however many rounds ran
    held = json.loads(b"".join(_dynamodb(durable, "Scan", {"TableName": table, "Select": "COUNT"}).body))["Count"]
    assert held == 1 + 5
    gc.collect()
    assert _live("Table") - tables_before == 0
    assert _live("Item") - items_before == held
