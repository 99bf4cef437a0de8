"""A restarted stack launches its workers with what they held at the last start, before the replica sets are
read, and starts again any worker the replica sets say holds something else (ferrymq.infra.held_partitions)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ferrymq.infra import held_partitions
from tests.support.sqs_clients import sqs_client


def _workers_partitions(stack: Any) -> dict[str, str]:
    """Each running worker's ``--partitions`` argument, by worker id, read from the stack's processes."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(pid)) != stack.process.pid:
                continue
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except (OSError, ProcessLookupError):
            continue
        if "--worker-id" in argv and "--partitions" in argv:
            found[argv[argv.index("--worker-id") + 1]] = argv[argv.index("--partitions") + 1]
    return found


def _recorded(stack: Any) -> dict[str, str]:
    return {w: ",".join(map(str, p)) for (_, w), p in held_partitions.read(stack.data_dir).items()}


def test_a_restart_starts_again_a_worker_launched_with_what_the_replica_sets_no_longer_say(
    private_stack: Any,
) -> None:
    sqs = sqs_client(private_stack.endpoint, "json")
    url = sqs.create_queue(QueueName="held")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="kept")
    # given a stack whose record of what each worker holds is what its workers run with
    truth = _workers_partitions(private_stack)
    assert len(truth) == 3
    assert _recorded(private_stack) == truth
    private_stack.stop()
    # when the record is wrong (replicas moved while the stack was down): one worker holds nothing by it, and
    # another a partition that does not exist
    record = json.loads(held_partitions.path(private_stack.data_dir).read_text())
    record["workers"][0]["partitions"] = []
    record["workers"][1]["partitions"] = [999]
    held_partitions.path(private_stack.data_dir).write_text(json.dumps(record))
    private_stack.start()
    # then every worker runs with what the replica sets say, and the record says so again
    assert _workers_partitions(private_stack) == truth
    assert _recorded(private_stack) == truth
    # and the stack serves what it held
    sqs = sqs_client(private_stack.endpoint, "json")
    got = sqs.receive_message(QueueUrl=sqs.get_queue_url(QueueName="held")["QueueUrl"], WaitTimeSeconds=5)
    assert [m["Body"] for m in got["Messages"]] == ["kept"]
    # and a record that cannot be read is a hint ignored: the workers start once the replica sets are read
    private_stack.stop()
    held_partitions.path(private_stack.data_dir).write_text("{not json")
    private_stack.start()
    assert _workers_partitions(private_stack) == truth
    assert _recorded(private_stack) == truth
