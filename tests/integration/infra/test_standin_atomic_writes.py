"""A read of the stand-in never sees half of a write: moto changes an item one attribute at a time, and DynamoDB
applies an UpdateItem atomically. Found as a worker's start that read a replica set's host without its port.

Driven in this process through :class:`DurableApp`, with a WSGI app standing in for moto that stops halfway
through each write until told to go on."""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ferrymq.infra.standin.asgi_bridge import dynamodb_environ
from ferrymq.infra.standin.durable_app import DurableApp
from ferrymq.infra.standin.replay_clock import ReplayClock


class HalfwayItem:
    """An item whose update sets ``host``, stops until ``go_on``, then sets ``port``; a read returns it."""

    def __init__(self) -> None:
        self.item: dict[str, Any] = {}
        self.midway = threading.Event()
        self.go_on = threading.Event()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ["HTTP_X_AMZ_TARGET"].endswith(".UpdateItem"):
            self.item["host"] = "127.0.0.1"
            self.midway.set()
            self.go_on.wait(10)
            self.item["port"] = 9400
            body = b"{}"
        else:
            body = json.dumps({"Item": dict(self.item)}).encode()
        start_response("200 OK", [("Content-Type", "application/x-amz-json-1.0")])
        return [body]


def test_a_read_during_a_write_sees_the_item_before_it_or_after_it_never_half(tmp_path: Path) -> None:
    app = HalfwayItem()
    durable = DurableApp(app, tmp_path, ReplayClock(lambda: datetime.datetime.now(datetime.UTC).replace(tzinfo=None)))
    durable.recover()
    try:
        def handle(action: str) -> dict[str, Any]:
            response = durable.handle(dynamodb_environ(action, region="us-east-1", access_key="test"), b"{}")
            return json.loads(b"".join(response.body))

        # given a write stopped halfway through its item
        writer = threading.Thread(target=handle, args=("UpdateItem",))
        writer.start()
        assert app.midway.wait(10)
        # when a read comes meanwhile, and is given time to run before the write goes on
        seen: list[dict[str, Any]] = []
        reader = threading.Thread(target=lambda: seen.append(handle("GetItem")))
        reader.start()
        time.sleep(0.2)
        app.go_on.set()
        writer.join(10)
        reader.join(10)
        # then it saw the whole write
        assert seen == [{"Item": {"host": "127.0.0.1", "port": 9400}}]
    finally:
        app.go_on.set()
        durable.close()
