"""What a storage worker reports on its admin listener's ``/metrics`` and ``/health/ready``.

Everything but the fsync latency is read from the worker's state when asked (a scrape costs the request path
nothing); fsync latency is a histogram each log's syncs feed (``LogWriter.on_sync``). Series:

========================================== ========== ================================================
name                                       type       labels
========================================== ========== ================================================
ferrymq_worker_ready                       gauge      (none): 1 when /health/ready answers 200
ferrymq_worker_requests_total              counter    (none): worker RPC requests received
ferrymq_worker_requests_in_flight          gauge      (none): replies waiting for a commit or a long poll
ferrymq_worker_partitions                  gauge      role: leader, follower, standby
ferrymq_worker_partition_role              gauge      partition, role (1 for the role played)
ferrymq_worker_log_bytes                   gauge      partition
ferrymq_worker_log_segments                gauge      partition
ferrymq_worker_queues                      gauge      partition
ferrymq_worker_messages                    gauge      partition
ferrymq_worker_replication_lag_records     gauge      partition, follower (led partitions only)
ferrymq_worker_fsync_seconds               histogram  (none)
ferrymq_worker_syncs_on_loop_total         counter    (none): group commits synced on the event loop
ferrymq_worker_slow_syncs_total            counter    (none): syncs that sent the next ones to the I/O threads
ferrymq_worker_loop_lag_seconds            histogram  (none): how late the event loop woke (:mod:`.loop_lag`)
ferrymq_worker_loop_lag_worst_seconds      gauge      (none): the longest of those in the last minute
ferrymq_worker_loop_cpu_wait_seconds_total counter    (none): the loop's thread runnable, waiting for a CPU
========================================== ========== ================================================
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ferrymq.storage.log.body_cache import BodyCache
from ferrymq.storage.log.sync_place import SyncPlace
from ferrymq.storage.server.loop_lag import LoopLagMonitor
from ferrymq.storage.server.replica import PartitionReplica

FSYNC_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
ROLES = ("leader", "follower", "standby")


class Worker(Protocol):
    """What is read of :class:`~ferrymq.storage.server.worker.StorageWorker`."""

    requests: int
    replicas: dict[int, PartitionReplica]
    loop_lag: LoopLagMonitor
    body_cache: BodyCache
    fsync_seconds: Histogram
    sync_place: SyncPlace

    @property
    def address(self) -> tuple[str, int] | None: ...


def role_of(replica: PartitionReplica) -> str:
    if replica.term is not None:
        return "leader"
    if replica.follower is not None and replica.following is not None:
        return "follower"
    return "standby"


def readiness(worker: Worker) -> tuple[bool, dict[str, str]]:
    """Whether the worker is ready: listening, and every partition it holds recovered and either led or
    followed with a known leader (a spare holding none is ready); with what each partition is doing."""
    partitions: dict[str, str] = {}
    for partition, replica in sorted(worker.replicas.items()):
        if replica.refusing:
            partitions[str(partition)] = "refused: its log is damaged"
            continue
        if replica.log is None:
            partitions[str(partition)] = "recovering"
            continue
        role = role_of(replica)
        if role == "follower" and replica.following is not None:
            host, port = replica.following[0]
            partitions[str(partition)] = f"following {host}:{port}"
        else:
            partitions[str(partition)] = "leading" if role == "leader" else "standing by (no role yet)"
    ready = worker.address is not None and all(
        state == "leading" or state.startswith("following ") for state in partitions.values()
    )
    return ready, partitions


class WorkerCollector(Collector):
    def __init__(self, worker: Worker) -> None:
        self._worker = worker

    def collect(self) -> Iterator[Metric]:
        worker = self._worker
        ready, _ = readiness(worker)
        yield GaugeMetricFamily("ferrymq_worker_ready", "1 while the worker is ready (/health/ready).",
                                value=1 if ready else 0)
        yield CounterMetricFamily("ferrymq_worker_requests", "Worker RPC requests received.", value=worker.requests)
        yield CounterMetricFamily("ferrymq_worker_syncs_on_loop", "Group commits synced on the event loop.",
                                  value=worker.sync_place.on_loop_syncs)
        yield CounterMetricFamily("ferrymq_worker_slow_syncs",
                                  "Syncs slow enough to send the next ones to the logs' I/O threads for a while.",
                                  value=worker.sync_place.slow_syncs)
        yield GaugeMetricFamily("ferrymq_worker_loop_lag_worst_seconds",
                                "The longest the event loop was held in the last minute.", value=worker.loop_lag.worst)
        yield CounterMetricFamily("ferrymq_worker_loop_cpu_wait_seconds",
                                  "Time the event loop's thread was ready to run but waited for a CPU the machine "
                                  "gave to others.", value=worker.loop_lag.waited_for_cpu)
        yield GaugeMetricFamily("ferrymq_worker_requests_in_flight",
                                "Requests received and not answered yet: replies waiting for their records to "
                                "commit, and long polls.", value=sum(_in_flight(r) for r in worker.replicas.values()))
        cache = worker.body_cache
        yield GaugeMetricFamily("ferrymq_worker_body_cache_bytes",
                                "Bytes of recent message bodies kept in memory (the rest are read from the logs).",
                                value=cache.size)
        yield CounterMetricFamily("ferrymq_worker_body_cache_hits", "Bodies answered from the body cache.",
                                  value=cache.hits)
        yield CounterMetricFamily("ferrymq_worker_body_reads",
                                  "Records read back from a log for a message body the cache did not hold.",
                                  value=sum(r.bodies.reads for r in worker.replicas.values()))
        checkpoints = CounterMetricFamily("ferrymq_worker_checkpoints",
                                          "Checkpoints taken while serving: put in place, or dropped (the log was "
                                          "cut or compacted meanwhile, or the writing failed).", labels=("result",))
        checkpoints.add_metric(("written",), sum(r.checkpoints.taken for r in worker.replicas.values()))
        checkpoints.add_metric(("dropped",), sum(r.checkpoints.dropped for r in worker.replicas.values()))
        yield checkpoints
        yield from self._partitions(worker.replicas)

    def _partitions(self, replicas: Mapping[int, PartitionReplica]) -> Iterator[Metric]:
        roles = GaugeMetricFamily("ferrymq_worker_partitions", "Partitions held, by the role played.",
                                  labels=("role",))
        role = GaugeMetricFamily("ferrymq_worker_partition_role", "The role played for each partition held.",
                                 labels=("partition", "role"))
        per_partition: dict[str, GaugeMetricFamily] = {
            "log_bytes": GaugeMetricFamily("ferrymq_worker_log_bytes", "Bytes in the partition's log segments.",
                                           labels=("partition",)),
            "log_segments": GaugeMetricFamily("ferrymq_worker_log_segments", "Segments of the partition's log.",
                                              labels=("partition",)),
            "queues": GaugeMetricFamily("ferrymq_worker_queues", "Queues with state in the partition.",
                                        labels=("partition",)),
            "messages": GaugeMetricFamily("ferrymq_worker_messages", "Messages held in the partition.",
                                          labels=("partition",)),
        }
        lag = GaugeMetricFamily("ferrymq_worker_replication_lag_records",
                                "Records of a led partition's log a follower has not yet made durable.",
                                labels=("partition", "follower"))
        counts = dict.fromkeys(ROLES, 0)
        for partition, replica in sorted(replicas.items()):
            label = str(partition)
            played = role_of(replica)
            counts[played] += 1
            role.add_metric((label, played), 1)
            for name, value in _sizes(replica).items():
                per_partition[name].add_metric((label,), value)
            for follower, records in _lags(replica).items():
                lag.add_metric((label, follower), records)
        for name, n in counts.items():
            roles.add_metric((name,), n)
        yield roles
        yield role
        yield from per_partition.values()
        yield lag


def _in_flight(replica: PartitionReplica) -> int:
    term = replica.term
    if term is None:
        return 0
    return int(term.stream.tracker.waiting) + term.long_polls.waiting()


def _sizes(replica: PartitionReplica) -> dict[str, int]:
    wal = replica.log
    queues = replica.engine.queues
    sizes: dict[str, Any] = {"queues": len(queues), "messages": sum(len(q.msgs) for q in queues.values())}
    if wal is not None:
        sizes["log_bytes"] = wal.total_bytes
        sizes["log_segments"] = len(wal.segments)
    return sizes


def _lags(replica: PartitionReplica) -> dict[str, int]:
    """Per follower of a led partition: records of the leader's log it has not acknowledged as durable."""
    term, wal = replica.term, replica.log
    if term is None or wal is None:
        return {}
    tracker = term.stream.tracker
    end = wal.end_offset
    return {r: max(end - tracker.acked.get(r, 0), 0) for r in tracker.replicas if r != tracker.me}


def worker_registry(worker: Worker) -> CollectorRegistry:
    """The registry ``/metrics`` renders."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WorkerCollector(worker))
    registry.register(worker.loop_lag.histogram)
    registry.register(worker.fsync_seconds)
    ProcessCollector(registry=registry)
    return registry
