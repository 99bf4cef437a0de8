"""A replica whose log is damaged on disk, in a real ``ferrymq up`` of three workers (RF 3, two partitions).

One worker's copy of partition 0 damaged in the middle (a bad record with intact ones after it): the worker
sets the copy aside (kept beside the log directory), leaves the in-sync set, catches up from the leader like a
new replica and is back in the set; every acknowledged message is received through the front end, and the
other partition never stopped.  Then every copy of partition 0 damaged: partition 0 is refused, named in the
logs and in ``ferrymq cluster status``, while partition 1 still serves and no worker exits.

The byte is flipped while the worker is stopped (SIGSTOP), then the worker is killed; ``up`` restarts it on
the damaged log.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import ferrymq
from ferrymq.storage.log.format import COMMIT, RECORD
from ferrymq.storage.log.segments import list_segments, segment_path
from tests.e2e.conftest import Stack
from tests.fault.conftest import fault_stack
from tests.fault.test_failover import cluster_status, worker_pids
from tests.fault.workload import fault_client
from tests.support.log_files import flip, frames_of
from tests.support.processes import stop_process

WORKERS = ("worker-0", "worker-1", "worker-2")


@pytest.fixture(scope="module")
def two_partitions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from fault_stack(tmp_path_factory, "damage-stack", FERRYMQ_PARTITIONS="2")


def wait_for(what: str, check: Callable[[], Any], timeout: float = 25.0, show: Callable[[], Any] = lambda: "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s {show()}")
        time.sleep(0.3)


def healthy(stack: Stack) -> dict | None:
    status = cluster_status(stack)
    parts = status["partitions"]
    ok = len(parts) == 2 and all(len(p["isr"]) == 3 and p["lease_ms_left"] > 0 for p in parts)
    return status if ok and all(w["answers"] for w in status["workers"]) else None


def queue_partition(stack: Stack, name: str) -> int:
    dynamodb = stack.aws_client("dynamodb")
    prefix = stack.env.get("FERRYMQ_TABLE_PREFIX", "ferrymq-")
    items = dynamodb.scan(
        TableName=f"{prefix}queues", FilterExpression="#n = :n", ExpressionAttributeNames={"#n": "name"},
        ExpressionAttributeValues={":n": {"S": name}},
    )["Items"]
    return int(items[0]["partition"]["N"])


def queues_on_each_partition(stack: Stack, client: Any) -> dict[int, str]:
    """A queue URL on partition 0 and one on partition 1."""
    found: dict[int, str] = {}
    while len(found) < 2:
        name = f"damage-{uuid.uuid4().hex[:8]}"
        url = client.create_queue(QueueName=name)["QueueUrl"]
        found.setdefault(queue_partition(stack, name), url)
    return found


def send(client: Any, url: str, count: int) -> set[str]:
    """``count`` messages, one request each (each its own log batch); returns the acknowledged bodies."""
    bodies = {f"m-{uuid.uuid4().hex}" for _ in range(count)}
    for body in bodies:
        client.send_message(QueueUrl=url, MessageBody=body)
    return bodies


def receive_all(client: Any, url: str, expected: int) -> set[str]:
    got: set[str] = set()
    deadline = time.monotonic() + 20
    while len(got) < expected and time.monotonic() < deadline:
        try:
            answer = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        except ClientError:
            continue
        for message in answer.get("Messages", []):
            got.add(message["Body"])
            client.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return got


def damage_middle_record(directory: Path) -> tuple[Path, int, bytes]:
    """Flip a byte inside a record in the middle of the log in ``directory``, one with committed batches
    after it (damage, not a torn tail); returns the segment, where the damaged frame starts and the segment's
    damaged contents."""
    best: tuple[Path, list[int]] | None = None
    for index in list_segments(directory):
        path = segment_path(directory, index)
        frames = frames_of(path)
        last_commit = max((f.start for f in frames if f.flags == COMMIT), default=0)
        records = [f.start for f in frames if f.flags == RECORD and f.end < last_commit]
        if best is None or len(records) > len(best[1]):
            best = (path, records)
    assert best is not None and len(best[1]) >= 4, f"too few records to damage in {directory}"
    path, starts = best
    start = starts[len(starts) // 2]
    flip(path, start + 12)  # inside the frame, past its length: the frame stays in place, its checksum fails
    return path, start, path.read_bytes()


def restart_damaged(stack: Stack, victims: tuple[str, ...]) -> dict[str, tuple[Path, int, bytes]]:
    """Stop each victim, damage its copy of partition 0, kill it, and wait until ``up`` restarted them all."""
    pids = worker_pids(stack)
    for victim in victims:
        stop_process(pids[victim])
    damaged = {v: damage_middle_record(stack.data_dir / "workers" / v / "p0") for v in victims}
    for victim in victims:
        os.kill(pids[victim], signal.SIGKILL)
    wait_for("the victims restarted", lambda: all(
        worker_pids(stack).get(v) not in (None, pids[v]) for v in victims
    ))
    return damaged


def test_a_damaged_replica_is_set_aside_and_caught_up_from_the_others(two_partitions: Stack) -> None:
    stack = two_partitions
    # given a healthy stack, messages acknowledged on a queue of each partition
    status = wait_for("a healthy stack", lambda: healthy(stack), 60)
    client = fault_client(stack.endpoint)
    urls = queues_on_each_partition(stack, client)
    sent = {p: send(client, url, 30) for p, url in urls.items()}
    # when the leader of partition 0 is stopped, a record in the middle of its log damaged, and it restarts
    victim = next(p["leader"] for p in status["partitions"] if p["partition"] == 0)
    (segment, byte, contents) = restart_damaged(stack, (victim,))[victim]
    # then the worker sets the copy aside, catches up and is back in the in-sync set, noted in the status
    repaired = wait_for("the replica back in sync", lambda: _note(stack, 0, victim, "repaired from replica"),
                        show=lambda: cluster_status(stack))
    assert f"{segment} at byte {byte}" in repaired
    aside = Path(repaired.rsplit(" set aside at ", 1)[1])
    assert aside.name.startswith("p0.damaged-") and aside.parent == segment.parent.parent
    # and the damaged copy is kept as it was, beside the new log
    assert (aside / segment.name).read_bytes() == contents
    assert (stack.data_dir / "workers" / victim / "p0").is_dir()
    log = stack.log_path.read_text()
    assert f"damaged log ({segment} at byte {byte}) set aside at {aside}" in log
    # and the worker process was not restarted again: it served throughout
    pid = worker_pids(stack)[victim]
    # and every acknowledged message comes out through the front end, from both partitions
    for partition, url in urls.items():
        assert receive_all(client, url, len(sent[partition])) == sent[partition], partition
    assert worker_pids(stack)[victim] == pid
    # and the text status and FerryMQ's GetClusterStatus name what happened
    assert f"partition 0 on {victim}: repaired from replica: damaged copy" in stack.ferrymq("cluster", "status")
    assert {"Replica": victim, "Note": repaired} in _api_partition(stack, 0)["Damage"]


def test_every_copy_damaged_refuses_the_partition_named_while_the_other_serves(two_partitions: Stack) -> None:
    stack = two_partitions
    # given a healthy stack and a queue on each partition, with messages on partition 0
    wait_for("a healthy stack", lambda: healthy(stack), 60)
    client = fault_client(stack.endpoint)
    urls = queues_on_each_partition(stack, client)
    send(client, urls[0], 20)
    # when every worker's copy of partition 0 is damaged and they all restart
    restart_damaged(stack, WORKERS)
    # then one worker, the last in sync, refuses partition 0 and names its damage; the others set theirs aside
    notes = wait_for("every copy noted", lambda: _notes_when_all(stack, 0), show=lambda: _partition(stack, 0))
    refused = [w for w, n in notes.items() if n.startswith("refused: damaged log")]
    assert len(refused) == 1, notes
    assert "no other in-sync replica holds what this copy held" in notes[refused[0]]
    assert cluster_status(stack)["partitions"][0]["isr"] == refused
    assert all("catching up from the leader (not in sync yet)" in n for w, n in notes.items() if w not in refused)
    assert "the partition is refused on this worker" in stack.log_path.read_text()
    assert {"Replica": refused[0], "Note": notes[refused[0]]} in _api_partition(stack, 0)["Damage"]
    # and partition 0 serves nothing
    with pytest.raises(ClientError) as failed:
        client.send_message(QueueUrl=urls[0], MessageBody="after")
    assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] >= 500
    # while partition 1 still does, and no worker exits over it
    pids = worker_pids(stack)
    body = f"p1-{uuid.uuid4().hex}"
    client.send_message(QueueUrl=urls[1], MessageBody=body)
    assert receive_all(client, urls[1], 1) == {body}
    assert worker_pids(stack) == pids


def _api_partition(stack: Stack, partition: int) -> dict:
    api = ferrymq.client("ferrymq", endpoint_url=stack.endpoint, region_name=stack.region,
                         aws_access_key_id=stack.access_key, aws_secret_access_key=stack.secret_key)
    return next(p for p in api.get_cluster_status()["Partitions"] if p["Partition"] == partition)


def _partition(stack: Stack, partition: int) -> dict:
    return next(p for p in cluster_status(stack)["partitions"] if p["partition"] == partition)


def _note(stack: Stack, partition: int, worker: str, state: str) -> str | None:
    note = _partition(stack, partition).get("damage", {}).get(worker)
    return note if note and note.startswith(state) else None


def _notes_when_all(stack: Stack, partition: int) -> dict[str, str] | None:
    notes = _partition(stack, partition).get("damage", {})
    return notes if len(notes) == 3 else None
