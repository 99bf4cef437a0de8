"""What a worker's start replays after a crash in the middle of a drain, with checkpoints counted in records or not.

    python benchmarks/drain_restart.py [--messages 1000000] [--drain 400000] [--records 0,8192]

For each value of ``--records`` (``FERRYMQ_WORKER_CHECKPOINT_RECORDS``; 0: checkpoints counted in bytes of log
alone), one storage worker in a child process, over loopback RPC: ``--messages`` messages of 256 B sent in batches
of ten, a clean stop (a checkpoint), a start, then ``--drain`` of them received and deleted ten at a time by eight
consumers, with the default checkpoint settings otherwise, and the child killed with SIGKILL once the drain is
done. Then the same directory is opened in process, as the worker's next start would, and the CPU of that open is
printed with the records it replayed. A drain writes records of some tens of bytes, so bytes alone rarely make a
checkpoint due. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import os
import signal
import tempfile
import time
import uuid
from pathlib import Path

from ferrymq.rpc.client import WorkerClient
from ferrymq.storage.log.checkpoint import read_checkpoint
from ferrymq.storage.server import StorageWorker, WorkerConfig

P = 0
RETENTION = 345600
KEY = bytes(range(32))
CONSUMERS = 8


def _message(i: int) -> dict:
    body = f"m{i:012d}" + "x" * 243
    return {"id": str(uuid.uuid4()), "body": body, "md5_body": hashlib.md5(body.encode()).hexdigest(),
            "system": {"SenderId": "AIDABENCHMARK0000000"}}


async def _fill(directory: Path, count: int) -> None:
    config = WorkerConfig(data_dir=directory, worker_id="bench", partitions=(P,), register=False,
                          checkpoint_bytes=0)
    worker = StorageWorker(config, {P: KEY})
    await asyncio.to_thread(worker.open)  # as a worker process opens: not on its loop
    client = WorkerClient(*await worker.start(), connect_timeout=5.0)
    gate = asyncio.Semaphore(16)

    async def send(start: int) -> None:
        async with gate:
            await client.send(P, "q", [_message(start + i) for i in range(10)], retention_seconds=RETENTION)

    await asyncio.gather(*(send(start) for start in range(0, count, 10)))
    await client.close()
    await worker.close()


async def _drain_then_die(directory: Path, count: int, records: int) -> None:
    config = WorkerConfig(data_dir=directory, worker_id="bench", partitions=(P,), register=False,
                          checkpoint_records=records)
    worker = StorageWorker(config, {P: KEY})
    await asyncio.to_thread(worker.open)  # as a worker process opens: not on its loop
    client = WorkerClient(*await worker.start(), connect_timeout=5.0)
    wal = worker.replicas[P].log
    assert wal is not None
    start_bytes, start_records = wal.end, wal.end_offset

    async def consume() -> None:
        done = 0
        while done < count // CONSUMERS:
            got = await client.receive(P, "q", max_messages=10, visibility_timeout=600, wait_seconds=0,
                                       retention_seconds=RETENTION)
            if not got:
                return
            await client.delete(P, "q", [m["receipt"] for m in got])
            done += len(got)

    began = time.monotonic()
    await asyncio.gather(*(consume() for _ in range(CONSUMERS)))
    took = time.monotonic() - began
    await asyncio.sleep(1.0)  # a checkpoint under way is put in place
    taken = worker.replicas[P].checkpoints.taken
    print(f"  drained in {took:.1f} s: {wal.end - start_bytes:,} bytes and {wal.end_offset - start_records:,} records "
          f"of log, {taken} checkpoints taken meanwhile; killed", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--drain", type=int, default=400_000)
    parser.add_argument("--records", default="0,8192", help="FERRYMQ_WORKER_CHECKPOINT_RECORDS values to compare")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    # The clients share the worker's loop here: their own 100,000 sends held at once are not the worker's stalls.
    logging.getLogger("ferrymq.storage.server.loop_lag").setLevel(logging.ERROR)
    for records in (int(value) for value in args.records.split(",")):
        with tempfile.TemporaryDirectory(prefix="ferrymq-drain-") as tmp:
            directory = Path(tmp)
            print(f"checkpoints every {records or 'no count of'} records: {args.messages:,} messages, "
                  f"{args.drain:,} drained", flush=True)
            asyncio.run(_fill(directory, args.messages))
            child = os.fork()
            if child == 0:
                asyncio.run(_drain_then_die(directory, args.drain, records))
                os._exit(1)
            os.waitpid(child, 0)
            checkpoint = read_checkpoint(directory / f"p{P}")
            assert checkpoint is not None
            worker = StorageWorker(WorkerConfig(data_dir=directory, worker_id="bench", partitions=(P,),
                                                register=False), {P: KEY})
            cpu, wall = time.process_time(), time.monotonic()
            worker.open()
            cpu, wall = time.process_time() - cpu, time.monotonic() - wall
            replica = worker.replicas[P]
            assert replica.log is not None
            replayed = replica.log.end_offset - 1 - checkpoint.offset
            print(f"  the next start: {cpu:.2f} s of CPU ({wall:.2f} s), {replayed:,} records replayed after its "
                  "checkpoint", flush=True)


if __name__ == "__main__":
    main()
