"""What a local user who is not the stack's owner, or a process without its secrets, can get from ``ferrymq up``:
nothing. The data directory is owner-only, the stand-in refuses foreign credentials, the workers' RPC port
answers only the cluster secret's holders, and no secret access key is stored in the clear."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from ferrymq.infra.cluster_secret import SECRET_FILE
from ferrymq.infra.standin.access_keys import KeyPair
from ferrymq.rpc.client import WorkerClient, WorkerUnreachable
from ferrymq.rpc.framing import Op, encode_frame
from ferrymq.rpc.peer_auth import PeerAuth
from tests.e2e.conftest import Stack
from tests.support.sqs_clients import sqs_client

pytestmark = pytest.mark.skipif(bool(os.environ.get("FERRYMQ_TEST_AWS_ENDPOINT")),
                                reason="the stack's own stand-in is what is checked")


def _workers(stack: Stack) -> list[dict[str, Any]]:
    return json.loads(stack.ferrymq("cluster", "status", "--json"))["workers"]


def _address(worker: dict[str, Any]) -> tuple[str, int]:
    host, port = worker["address"].rsplit(":", 1)
    return host, int(port)


def _raw(address: tuple[str, int], sent: bytes) -> bytes:
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(sent)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def _workload(stack: Stack) -> str:
    sqs = sqs_client(stack.endpoint, "json")
    url = sqs.create_queue(QueueName=f"modes-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    for i in range(5):
        sqs.send_message(QueueUrl=url, MessageBody=f"body {i}")
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2)["Messages"]
    for message in got:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return url


def test_every_directory_and_file_of_the_data_dir_is_owner_only_after_a_workload(stack: Stack) -> None:
    # given a workload that writes segments, journal, usage records, and an admin command
    _workload(stack)
    stack.create_credentials("444455556666", "modes")
    # then every directory is 0700 and every file 0600
    wider = []
    for directory, _, files in os.walk(stack.data_dir):
        entries = [(Path(directory), 0o700)] + [(Path(directory) / name, 0o600) for name in files]
        for path, mode in entries:
            with_mode = stat.S_IMODE(path.lstat().st_mode)
            if not stat.S_ISLNK(path.lstat().st_mode) and with_mode != mode:
                wider.append(f"{oct(with_mode)} {path.relative_to(stack.data_dir)}")
    assert wider == []
    assert {p.name for p in stack.data_dir.iterdir()} >= {"aws", "workers", SECRET_FILE}


def test_the_standin_refuses_made_up_credentials_and_holds_no_secret_in_the_clear(stack: Stack) -> None:
    # given a key created with the admin command
    key_id, secret = stack.create_credentials("444455556666", "scanner")
    stranger = stack.aws_client("dynamodb", aws_access_key_id="AKIAMADEUPMADEUP0000", aws_secret_access_key="x")
    # when someone scans the credentials table with made-up keys, then the stand-in refuses
    with pytest.raises(ClientError) as refused:
        stranger.scan(TableName="ferrymq-credentials")
    assert refused.value.response["Error"]["Code"] == "UnrecognizedClientException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    # and with the stack's own key pair the scan works, but shows the secret only sealed
    items = stack.aws_client("dynamodb").scan(TableName="ferrymq-credentials", ConsistentRead=True)["Items"]
    assert key_id in [item["access_key_id"]["S"] for item in items]
    assert secret.encode() not in repr(items).encode()
    # and no file of the data directory (journal, snapshot, segments, logs) holds it either
    for path in stack.data_dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_the_worker_port_gives_nothing_without_the_cluster_secret(stack: Stack) -> None:
    workers = _workers(stack)
    # given the admin command, which reads the data directory's secret, reaches every worker
    assert [w["answers"] for w in workers] == [True] * len(workers)
    address = _address(workers[0])
    # when a raw client sends requests without the handshake, then the connection closes with no byte sent
    assert _raw(address, encode_frame(1, Op.PING, b"\x90") + encode_frame(2, Op.STATS, b"\x93\x00\xa1q\x01")) == b""

    async def clients() -> None:
        wrong = WorkerClient(*address, connect_timeout=5, request_timeout=5, auth=PeerAuth("a guessed secret"))
        with pytest.raises(WorkerUnreachable):
            await wrong.ping()
        await wrong.close()
        secret = (stack.data_dir / SECRET_FILE).read_text().strip()
        right = WorkerClient(*address, connect_timeout=5, request_timeout=5, auth=PeerAuth(secret))
        try:
            assert (await right.ping())["worker_id"] == workers[0]["worker_id"]
        finally:
            await right.close()

    asyncio.run(clients())


def test_the_standin_key_pair_is_private_and_not_the_well_known_one(stack: Stack) -> None:
    stored = json.loads((stack.data_dir / "aws" / "credentials").read_text())
    pair = KeyPair(stored["access_key_id"], stored["secret_access_key"])
    assert pair.access_key_id != "test" and len(pair.secret_access_key) == 40
    well_known = stack.aws_client("dynamodb", aws_access_key_id="test", aws_secret_access_key="test")
    with pytest.raises(ClientError):
        well_known.list_tables()
