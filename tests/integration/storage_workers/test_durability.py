"""kill -9 and restart on the same data directory: nothing acknowledged is lost, nothing deleted comes back."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from ferrymq.errors import ServiceUnavailable
from ferrymq.rpc.client import WorkerClient
from tests.integration.conftest import WorkerProcess

RETENTION = 345600
IN_FLIGHT_SECONDS = 8
Q = "000000000000/durable/1"


def message(i: int) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "body": f"message {i} " + "·" * (i % 50),
        "attrs": {
            "index": {"DataType": "Number", "StringValue": str(i)},
            "raw": {"DataType": "Binary", "BinaryValue": bytes([i % 256, 0, 255])},
        },
        "md5_body": f"md5-{i}",
        "md5_attrs": f"md5a-{i}",
        "delay": 0,
        "system": {"SenderId": "AIDAEXAMPLE", "AWSTraceHeader": {"DataType": "String", "StringValue": f"Root={i}"}},
    }


def as_sent(m: dict, sent_ts: int) -> tuple:
    return (m["id"], m["body"], m["attrs"], m["md5_body"], m["md5_attrs"], m["system"], sent_ts)


def as_received(m: dict) -> tuple:
    return (m["id"], m["body"], m["attrs"], m["md5_body"], m["md5_attrs"], m["system"], m["sent_ts"])


async def drain(client: WorkerClient, visibility: int = 600) -> list[dict]:
    out: list[dict] = []
    while True:
        got = await client.receive(0,
            Q, max_messages=10, visibility_timeout=visibility, wait_seconds=0, retention_seconds=RETENTION
        )
        if not got:
            return out
        out.extend(got)


def test_acknowledged_state_survives_kill_9(start_worker: Callable[..., WorkerProcess], tmp_path: Path) -> None:
    data_dir = tmp_path / "worker"
    worker = start_worker(data_dir)
    acknowledged: dict[str, tuple] = {}

    async def before_crash() -> tuple[set[str], dict[str, dict], float]:
        client = WorkerClient(worker.host, worker.port)
        # given 300 messages sent and acknowledged
        batches = [[message(b * 10 + i) for i in range(10)] for b in range(30)]
        results = await asyncio.gather(*(client.send(0, Q, batch, retention_seconds=RETENTION) for batch in batches))
        for batch, result in zip(batches, results, strict=True):
            for m, r in zip(batch, result, strict=True):
                assert r["id"] == m["id"]
                acknowledged[m["id"]] = as_sent(m, r["sent_ts"])
        # and 100 of them received, 60 of those deleted and 40 left in flight
        received = await drain_n(client, 100, IN_FLIGHT_SECONDS)
        received_at = time.monotonic()
        deleted = {m["id"] for m in received[:60]}
        assert await client.delete(0, Q, [m["receipt"] for m in received[:60]]) == [None] * 60
        in_flight = {m["id"]: m for m in received[60:]}

        # while more sends are under way, the worker is killed with SIGKILL
        async def keep_sending() -> None:
            i = 10_000
            while True:
                batch = [message(i + k) for k in range(10)]
                i += 10
                try:
                    result = await client.send(0, Q, batch, retention_seconds=RETENTION)
                except ServiceUnavailable:
                    return
                for m, r in zip(batch, result, strict=True):
                    acknowledged[m["id"]] = as_sent(m, r["sent_ts"])

        senders = [asyncio.ensure_future(keep_sending()) for _ in range(4)]
        await asyncio.sleep(0.3)
        worker.kill9()
        await asyncio.wait_for(asyncio.gather(*senders), 10)
        await client.close()
        return deleted, in_flight, received_at

    deleted, in_flight, received_at = asyncio.run(before_crash())
    assert len(acknowledged) > 300  # some sends were acknowledged while the crash came

    # when the worker restarts on the same data directory
    restarted = start_worker(data_dir)

    async def after_restart() -> None:
        client = WorkerClient(restarted.host, restarted.port)
        try:
            visible = await drain(client)
            still_invisible = time.monotonic() < received_at + IN_FLIGHT_SECONDS - 0.5
            got = {m["id"]: m for m in visible}
            # then every acknowledged message that was neither deleted nor in flight is there, exactly as sent
            expected = set(acknowledged) - deleted - set(in_flight)
            assert expected <= set(got)
            for message_id in expected:
                assert as_received(got[message_id]) == acknowledged[message_id]
                assert got[message_id]["receive_count"] == 1
            # no deleted message came back, and nothing unknown appeared beyond unacknowledged sends
            assert not deleted & set(got)
            assert all(m["body"].startswith("message ") for m in visible)
            # the in-flight ones stay invisible until their deadline ...
            if still_invisible:
                assert not set(in_flight) & set(got)
            # ... and then come back, received twice, first-receive time kept
            back: dict[str, dict] = {}
            deadline = time.monotonic() + IN_FLIGHT_SECONDS + 10
            while len(back) < len(in_flight) and time.monotonic() < deadline:
                for m in await client.receive(0,
                    Q, max_messages=10, visibility_timeout=600, wait_seconds=2, retention_seconds=RETENTION
                ):
                    back[m["id"]] = m
            assert set(back) == set(in_flight)
            for message_id, m in back.items():
                assert m["receive_count"] == 2
                assert m["first_receive_ts"] == in_flight[message_id]["first_receive_ts"]
                assert as_received(m) == acknowledged[message_id]
        finally:
            await client.close()

    asyncio.run(after_restart())
    assert restarted.terminate() == 0


async def drain_n(client: WorkerClient, n: int, visibility: int) -> list[dict]:
    out: list[dict] = []
    while len(out) < n:
        got = await client.receive(0,
            Q,
            max_messages=min(10, n - len(out)),
            visibility_timeout=visibility,
            wait_seconds=0,
            retention_seconds=RETENTION,
        )
        assert got
        out.extend(got)
    return out
