"""The worker process: open the logs, listen (and serve health checks and metrics on an admin port,
:mod:`.admin`), play the roles the cluster's replica sets give (the controller,
:mod:`ferrymq.storage.replication.controller`), serve until told to stop."""

from __future__ import annotations

import asyncio
import logging
import secrets
import signal
import sys
from typing import TextIO

from ferrymq import collector
from ferrymq.aws import session
from ferrymq.aws.partitions import RECEIPT_KEY_BYTES, PartitionMap
from ferrymq.aws.queue_store import QueueStore
from ferrymq.aws.replica_sets import ReplicaSets
from ferrymq.aws.workers import WorkerRegistry
from ferrymq.clock import SystemClock
from ferrymq.errors import SqsError
from ferrymq.orphan_watch import wait_until_orphaned
from ferrymq.replication_rules import Acks
from ferrymq.settings import Settings
from ferrymq.storage.peers import ClusterPeers
from ferrymq.storage.replication.controller import (
    MANAGER_LEAST_SECONDS,
    MANAGER_SECONDS,
    ClusterController,
    ControllerTimes,
)
from ferrymq.storage.server import allocator
from ferrymq.storage.server.admin import AdminServer
from ferrymq.storage.server.config import WorkerConfig
from ferrymq.storage.server.damage import repair
from ferrymq.storage.server.metrics import worker_registry
from ferrymq.storage.server.replica import PartitionReplica
from ferrymq.storage.server.worker import StorageWorker
from ferrymq.storage.shutdown import hand_over_leaderships

log = logging.getLogger(__name__)

READY_LINE = "FERRYMQ_WORKER_READY"


async def _stop_when_orphaned(worker: StorageWorker, parent_pid: int) -> None:
    if await wait_until_orphaned(parent_pid, worker.stopped.is_set):
        log.info("parent process %d is gone; stopping", parent_pid)
        worker.stopped.set()


async def run_worker(
    config: WorkerConfig, settings: Settings, *, out: TextIO | None = None, parent_pid: int | None = None
) -> int:
    """Run a worker until SIGTERM or SIGINT, or until ``parent_pid`` is no longer its parent; returns the
    process exit status."""
    out = out if out is not None else sys.stdout
    # Before recovery builds the message tables: it is their growth the setting is for.
    allocator.keep_large_blocks_mapped()
    if config.peer_auth is None:
        log.warning("no cluster secret (FERRYMQ_CLUSTER_SECRET or FERRYMQ_CLUSTER_SECRET_FILE): any process that "
                    "reaches this worker's port can read and change its queues")
    partition_map = PartitionMap.from_settings(settings) if config.register else None
    clock = SystemClock(settings.worker_clock_skew_ms / 1000)
    if settings.worker_clock_skew_ms:
        log.warning("this worker's wall clock is set %d ms off the system's (a test of clock skew)",
                    settings.worker_clock_skew_ms)
    # The logs are recovered before the first call to the coordination tables, which the receipt keys are read
    # from: they are needed only to serve, and under ``up`` the AWS resources are being checked meanwhile
    # (ferrymq.infra.held_partitions).
    worker = StorageWorker(config, None, clock=clock, peers=ClusterPeers.from_settings(settings))
    coordination: tuple[QueueStore, ReplicaSets, WorkerRegistry] | None = None
    try:
        worker.open()
        refused = [r.damage.detail for r in worker.replicas.values() if r.damage is not None]
        if partition_map is None and refused and len(refused) == len(worker.replicas):
            # Outside a cluster no replica can repair it, and nothing else is left to serve.
            raise RuntimeError("; ".join(refused))
        # What would hold the loop once it serves is done before: botocore takes 40-70 ms to build a client, and a
        # full collection walks the recovered state (its ``extra`` list has a slot per message), 60-130 ms at three
        # million messages. Frozen now, the state is never walked by a collection again.
        if partition_map is not None:
            coordination = (
                QueueStore(session.client("dynamodb", settings), settings.queues_table),
                ReplicaSets.from_settings(settings),
                WorkerRegistry.from_settings(settings),
            )
    except Exception as exc:
        log.error("storage worker could not start: %s", exc)
        await worker.close()
        return 1
    try:
        worker.use_receipt_keys({
            partition: (
                await asyncio.to_thread(partition_map.receipt_key, partition)
                if partition_map is not None
                # A worker outside any partition map (benchmarks, experiments): its handles die with the process.
                else secrets.token_bytes(RECEIPT_KEY_BYTES)
            )
            for partition in worker.replicas
        })
    except SqsError as exc:
        log.error("could not read the partitions' receipt keys: %s", exc.__cause__ or exc.message)
        await worker.close()
        return 1
    try:
        collector.settle()
        host, port = await worker.start(static_roles=partition_map is None)
    except Exception as exc:
        log.error("storage worker could not start: %s", exc)
        await worker.close()
        return 1
    try:
        admin = await _start_admin(worker, config)
    except OSError as exc:
        log.error("the admin listener could not start on %s:%s: %s", config.admin_host, config.admin_port, exc)
        await worker.close()
        return 1
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stopped.set)
    controller: ClusterController | None = None
    if coordination is not None:
        queue_store, sets, registry = coordination
        worker.run_pending_drops(queue_store)
        controller = ClusterController(
            config.worker_id,
            settings.cluster,
            worker.replicas,
            (host, port),
            sets,
            registry,
            acks=Acks(settings.acks),
            times=controller_times(settings),
            clock=clock,
            host=lambda partition: _host(worker, partition_map, sets, partition),
            replication_address=(host, config.replication_port) if config.replication_port else None,
            admin_address=admin.address if admin is not None else None,
        )
        try:
            # Damaged copies leave the in-sync set before the first pass could have them claim or follow.
            for replica in list(worker.replicas.values()):
                if replica.refusing:
                    await repair(replica, sets, config.worker_id, lambda: _now_ms(worker))
            # One pass before the ready line: the partitions this worker is to lead are led when it is ready.
            await controller.start_up(within_seconds=2 * settings.leader_lease_seconds)
        except SqsError as exc:
            # Outages come with the generic message clients see; the botocore failure behind one says what broke.
            log.error("could not read the cluster's replica sets: %s", exc.__cause__ or exc.message)
            if admin is not None:
                await admin.close()
            await worker.close()
            return 1
        controller.start()
    log.info(
        "worker %s holds partitions %s at %s:%d (leads %s)",
        config.worker_id,
        ",".join(str(p) for p in worker.replicas),
        host,
        port,
        ", ".join(f"{p} in epoch {r.leading_epoch}" for p, r in worker.replicas.items() if r.term) or "none yet",
    )
    if not worker.stopped.is_set():
        # Again for what starting to serve made (the state is frozen already: this walks little).
        collector.settle()
        print(f"{READY_LINE} {host} {port}", file=out, flush=True)
    watch = asyncio.create_task(_stop_when_orphaned(worker, parent_pid)) if parent_pid is not None else None
    await worker.stopped.wait()
    if watch is not None:
        watch.cancel()
    if controller is not None:
        await controller.close()
        # Told to stop (a rolling replacement): in-sync replicas take over now, not once the leases run out.
        await hand_over_leaderships(worker.replicas, controller.sets, config.worker_id, controller.now_ms)
    if admin is not None:
        await admin.close()
    await worker.close()
    if worker.fatal is not None:
        log.critical("stopped after a log failure: %s", worker.fatal)
        return 1
    return 0


async def _start_admin(worker: StorageWorker, config: WorkerConfig) -> AdminServer | None:
    """The admin listener (health checks, metrics), listening; None when the configuration asks for none."""
    if config.admin_port is None:
        return None
    admin = AdminServer(worker, worker_registry(worker), config.admin_host, config.admin_port)
    host, port = await admin.start()
    log.info("worker %s: health checks and metrics on http://%s:%d (/health/live, /health/ready, /metrics)",
             config.worker_id, host, port)
    return admin


async def _host(
    worker: StorageWorker, partition_map: PartitionMap, sets: ReplicaSets, partition: int
) -> PartitionReplica:
    key = await asyncio.to_thread(partition_map.receipt_key, partition)
    replica = await worker.host(partition, key)
    if replica.refusing and replica.damage is not None and replica.damage.refused is None:
        await repair(replica, sets, worker.config.worker_id, lambda: _now_ms(worker))
    return replica


def _now_ms(worker: StorageWorker) -> int:
    return int(worker.clock.now() * 1000)


def controller_times(settings: Settings) -> ControllerTimes:
    grace = settings.worker_grace_seconds
    return ControllerTimes(
        lease_ms=int(settings.leader_lease_seconds * 1000),
        max_lag_ms=int(settings.replica_max_lag_seconds * 1000),
        # Three heartbeats within the grace at least, so that one slow write never makes a live worker dead.
        heartbeat_seconds=min(settings.worker_heartbeat_seconds, grace / 3),
        handover_after_ms=int(settings.leader_handover_seconds * 1000),
        # A dead worker's replicas are moved within one and a half graces.
        manager_seconds=min(MANAGER_SECONDS, max(grace / 2, MANAGER_LEAST_SECONDS)),
        grace_ms=int(grace * 1000),
    )
