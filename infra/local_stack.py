"""``ferrymq up``: the whole stack on one machine, in the foreground.

One ``up`` per data directory (:mod:`ferrymq.infra.data_dir_lock`): a second is refused before it touches
anything, and each ``up`` removes only the files it wrote.

Start order: AWS stand-in (unless an endpoint is named), bootstrap of tables/bucket/key, the development
credential, the replica sets of the storage cluster, its workers (``FERRYMQ_WORKERS``, 3 by default, each
partition on ``FERRYMQ_REPLICATION_FACTOR`` of them, acknowledged per ``FERRYMQ_ACKS``), the gateway. The
stack is ready once the gateway and the workers are, except workers that failed to start as long as a majority
of each cluster's workers is ready: then one banner (naming any worker that is failing, with its last error) and
the machine-readable line ``FERRYMQ_READY endpoint=URL``. A worker that fails to start or dies is started again
with backoff (:mod:`ferrymq.infra.worker_pool`) while the others keep serving; only a cluster without a majority
of ready workers after ``RESTART_READY_TIMEOUT`` stops start-up. SIGTERM or SIGINT stops the children
in reverse order (SIGTERM, then SIGKILL after a timeout) and returns 0; a stand-in or gateway that dies on
its own is reported, the rest are stopped, and the return value is 1. With ``FERRYMQ_GATEWAY_PROCESSES`` above 1
the gateway is that many processes on one port (``SO_REUSEPORT``), all awaited before the banner, which says how
many; one of them that dies is started again with backoff, like a worker, while the others serve the port.

All children share this process's process group, so ``kill -9 -PGID`` takes the whole stack down at once,
and a terminal's Ctrl-C reaches every process together: the gateway and the workers stop cleanly on their
own, while the stand-in ignores it and is stopped last, by this process, once they have made their last
writes to it (usage records, metrics, leases). Should this process die alone, the stand-in, the workers and
the gateway notice (``--parent-pid``) and stop cleanly too.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import TextIO

from ferrymq.aws.credentials import Credential, CredentialStore
from ferrymq.infra import asgi_serving, aws_target, declared_queues, held_partitions, stack_endpoint, tls
from ferrymq.infra.bootstrap import bootstrap
from ferrymq.infra.children import (
    Child,
    ChildFailed,
    Starting,
    child_environment,
    launch_child,
    python_module_argv,
    signal_name,
    stop_all,
)
from ferrymq.infra.cluster import cluster_layouts, ensure_replica_sets
from ferrymq.infra.cluster_secret import SECRET_FILE_ENV, ensure_secret_file, with_local_secret
from ferrymq.infra.data_dir_lock import DataDirInUse, DataDirLock
from ferrymq.infra.gateway import READY_PREFIX as GATEWAY_READY_PREFIX
from ferrymq.infra.worker_pool import RESTART_READY_TIMEOUT, WorkerPool
from ferrymq.private_files import private_dir, restrict_umask, tighten_tree
from ferrymq.settings import Settings
from ferrymq.storage.log.lock import locked
from ferrymq.storage.server.layout import adopt_legacy_log, legacy_segments, replica_dir

WORKER_READY_PREFIX = "FERRYMQ_WORKER_READY"
PUSH_READY_PREFIX = "FERRYMQ_PUSH_READY"
PUSH_HOSTS = 2
WORKER_ID = "worker-0"
"""The first storage worker, which adopts the logs of the layouts before replication."""
READY_PREFIX = "FERRYMQ_READY"
PUSH_NETWORKS_ENV = "FERRYMQ_PUSH_ALLOWED_NETWORKS"
LOCAL_PUSH_NETWORKS = "127.0.0.0/8,::1/128"
DEV_USER_NAME = "dev"
POLL_SECONDS = 0.2
READY_POLL_SECONDS = 0.02
STANDIN_READY_TIMEOUT = 60.0
"""How long the stand-in may take to serve (its imports, its snapshot and journal) before ``up`` gives up."""


class StartupFailed(RuntimeError):
    """A step of start-up other than a child process failed."""


@dataclass
class _StopRequest:
    """Set from signal handlers; start-up and supervision poll it."""

    event: threading.Event = field(default_factory=threading.Event)
    signum: int | None = None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum
        self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()


def seed_dev_credential(settings: Settings) -> None:
    """Make sure the development access key exists, as an admin key (the admin commands sign with it), without
    rewriting it on every start; a stack seeded before keys had an admin flag gets it now."""
    store = CredentialStore.from_settings(settings)
    current = store.get(settings.dev_access_key)
    if (
        current is not None
        and current.secret_access_key == settings.dev_secret_key
        and current.account_id == settings.account_id
        and current.admin
    ):
        return
    store.put(
        Credential(
            access_key_id=settings.dev_access_key,
            secret_access_key=settings.dev_secret_key,
            account_id=settings.account_id,
            user_name=DEV_USER_NAME,
            created_at=time.time(),
            admin=True,
        )
    )


def adopt_worker_per_partition_logs(settings: Settings) -> int:
    """Move the logs of stacks that ran one worker per partition (``workers/worker-<p>/``, partition ``p``) into
    the one worker's ``p<p>/``; returns how many files moved.  ``worker-0`` is that worker's own directory,
    which it adopts itself.  Each file is one rename, so a crash midway is finished on the next start."""
    workers = settings.data_dir / "workers"
    moved = 0
    for partition in range(1, settings.partitions):
        old = workers / f"worker-{partition}"
        if not legacy_segments(old):
            continue
        with locked(old):
            moved += adopt_legacy_log(old, replica_dir(workers / WORKER_ID, partition))
    return moved


def banner(settings: Settings, endpoint: str, aws_endpoint: str, standin: bool, failing: Sequence[str] = ()) -> str:
    """What ``up`` prints once ready; ``failing`` are the workers not ready, each ``id: why`` (see
    :meth:`WorkerPool.failing`)."""
    aws_line = f"{aws_endpoint} (stand-in, state in {aws_target.standin_dir(settings)})" if standin else aws_endpoint
    return "\n".join(
        [
            "FerryMQ is up.",
            f"  endpoint         {endpoint}",
            f"  gateway          {_gateway_line(settings)}",
            f"  region           {settings.region}",
            f"  account          {settings.account_id}",
            f"  access key id    {settings.dev_access_key} (an admin key: the admin commands sign with it)",
            f"  secret key       {settings.dev_secret_key}",
            f"  AWS services     {aws_line}",
            f"  storage          {_storage_line(settings)}",
            *[f"  failing          {line}; started again with backoff" for line in failing],
            f"  data             {settings.data_dir}",
            *([f"  dashboard        {endpoint}/dashboard/ (log in with the access key above"
               f"{'' if settings.dashboard_remote else '; served to loopback only'})"]
              if settings.dashboard_enabled else []),
            "",
            f"  try: aws sqs list-queues --endpoint-url {endpoint} --region {settings.region}"
            f"{_ca_bundle(settings, endpoint)}",
            "  stop with Ctrl-C",
            "",
            f"{READY_PREFIX} endpoint={endpoint}",
        ]
    )


def _ca_bundle(settings: Settings, endpoint: str) -> str:
    """The CLI option that makes clients trust the gateway's certificate, when it serves HTTPS."""
    if not endpoint.startswith("https://"):
        return ""
    return f" --ca-bundle {settings.tls_cert_file or tls.self_signed_dir(settings) / tls.CERT_NAME}"


def _storage_line(settings: Settings) -> str:
    """E.g. ``cluster local: 3 workers, 1 partition, replication factor 3, acks majority``."""
    names = [layout.name for layout in cluster_layouts(settings)]
    shape = f"{_count(settings.workers, 'worker')}, {_count(settings.partitions, 'partition')}"
    if len(names) == 1:
        where = f"cluster {names[0]}: {shape}"
    else:
        where = f"{len(names)} clusters ({', '.join(names)}), each {shape}"
    return f"{where}, replication factor {settings.replication_factor}, acks {settings.acks}"


def _gateway_line(settings: Settings) -> str:
    """E.g. ``2 processes sharing the port`` (``FERRYMQ_GATEWAY_PROCESSES``)."""
    n = settings.gateway_processes
    return "1 process" if n == 1 else f"{n} processes sharing the port (SO_REUSEPORT)"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def run_up(settings: Settings, env: Mapping[str, str], out: TextIO | None = None) -> int:
    """Run the stack until a signal (returns 0) or until the stand-in or the gateway fails (returns 1)."""
    out = out or sys.stdout
    try:
        # Before anything else: a second `up` must not touch the running one's files or children.
        data_lock = DataDirLock.acquire(private_dir(settings.data_dir))
    except (DataDirInUse, OSError) as exc:
        print(f"ferrymq: {exc}", file=sys.stderr, flush=True)
        return 1
    try:
        return _run_holding_data_dir(settings, env, out)
    finally:
        data_lock.release()


def _run_holding_data_dir(settings: Settings, env: Mapping[str, str], out: TextIO) -> int:
    stop = _StopRequest()
    previous = {sig: signal.signal(sig, stop.handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    children: list[Child] = []
    pool = WorkerPool(WORKER_READY_PREFIX, should_abort=stop.is_set)
    standin = aws_target.named_endpoint(env) is None
    try:
        try:
            endpoint = _start(settings, env, stop, children, pool, standin, out)
        except (ChildFailed, StartupFailed) as exc:
            if stop.is_set():
                return 0
            print(f"ferrymq: {exc}", file=sys.stderr, flush=True)
            return 1
        if endpoint is None:
            return 0
        return _supervise(children, pool, stop)
    finally:
        # Reverse start order: gateway, workers, stand-in. Only files this process wrote are removed.
        stack_endpoint.forget(settings)
        stop_all(children[1:] if standin else children)
        pool.stop()
        if standin and children:
            stop_all(children[:1])
            if children[0].ready_fields:
                aws_target.remove_endpoint_file(settings, children[0].ready_fields[0])
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def check_cluster_shape(settings: Settings) -> None:
    if settings.workers < 1 or settings.partitions < 1 or settings.clusters < 1:
        raise StartupFailed("FERRYMQ_WORKERS, FERRYMQ_PARTITIONS and FERRYMQ_CLUSTERS must be at least 1")
    if settings.cluster_max_queues < 1:
        raise StartupFailed("FERRYMQ_CLUSTER_MAX_QUEUES must be at least 1")
    if not 1 <= settings.replication_factor <= settings.workers:
        raise StartupFailed(
            f"FERRYMQ_REPLICATION_FACTOR ({settings.replication_factor}) must be between 1 and FERRYMQ_WORKERS "
            f"({settings.workers})"
        )
    if settings.acks not in ("leader", "majority", "all"):
        raise StartupFailed(f"FERRYMQ_ACKS must be leader, majority or all, not {settings.acks!r}")


def check_worker_settings(settings: Settings) -> None:
    """Refuse what no worker would start with (a negative checkpoint interval, say): each would exit at once, and
    the pool would start it again and again while the stack looked half up."""
    # Here, not at import: the CLI's other commands load no part of the worker.
    from ferrymq.storage.server.config import WorkerConfig

    try:
        WorkerConfig.from_settings(settings, worker_id="worker-0", partitions=(0,))
    except ValueError as exc:
        raise StartupFailed(str(exc)) from None


def check_fixed_ports(settings: Settings) -> None:
    """Refuse fixed ports that would collide: the workers take consecutive ports from FERRYMQ_WORKER_PORT and
    FERRYMQ_WORKER_ADMIN_PORT (one each per worker of every cluster), which must not overlap each other, the
    gateway's FERRYMQ_PORT or the stand-in's FERRYMQ_STANDIN_PORT."""
    count = settings.workers * settings.clusters
    ranges = [
        (name, range(first, first + size))
        for name, first, size in (
            ("FERRYMQ_PORT", settings.port, 1),
            ("FERRYMQ_STANDIN_PORT", settings.standin_port, 1),
            ("FERRYMQ_WORKER_PORT", settings.worker_port, count),
            ("FERRYMQ_WORKER_ADMIN_PORT", settings.worker_admin_port, count),
        )
        if first
    ]
    for index, (name, ports) in enumerate(ranges):
        for other, others in ranges[index + 1:]:
            if ports.start < others.stop and others.start < ports.stop:
                raise StartupFailed(
                    f"{name} ({_span(ports)}) and {other} ({_span(others)}) overlap: the {count} workers take "
                    "one port each from a fixed FERRYMQ_WORKER_PORT and FERRYMQ_WORKER_ADMIN_PORT. Choose ports "
                    "further apart, or 0 for any free ones."
                )


def _span(ports: range) -> str:
    return str(ports.start) if len(ports) == 1 else f"{ports.start}-{ports.stop - 1}"


def check_port_free(host: str, port: int, variable: str = "FERRYMQ_PORT") -> None:
    """Refuse at once, before any child starts, when a fixed port (``variable``'s) is taken (another stack, or
    anything else): otherwise the gateway would fail only after the stand-in and the workers had started."""
    if port == 0:
        return
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        raise _port_taken(host, port, variable, exc) from None


def _port_taken(host: str, port: int, variable: str, exc: OSError) -> StartupFailed:
    return StartupFailed(
        f"cannot listen on {host}:{port}: {exc.strerror or exc}. Is another FerryMQ (or anything else) using "
        f"it? Stop it, or choose another port with {variable} (0 picks a free one)."
    )


def _start(settings: Settings, env: Mapping[str, str], stop: _StopRequest, children: list[Child], pool: WorkerPool,
           standin: bool, out: TextIO) -> str | None:
    """Start every part in order; returns the gateway's URL, or None if a stop was requested meanwhile."""
    check_cluster_shape(settings)
    check_worker_settings(settings)
    check_fixed_ports(settings)
    declared = _declared_queues(settings)
    check_port_free(settings.host, settings.port)
    # Made once here, before any gateway starts: every gateway process of the port serves that one pair.
    try:
        tls.tls_files(settings)
    except (tls.TlsConfigError, OSError) as exc:
        raise StartupFailed(f"TLS: {exc}") from None
    if aws_target.named_endpoint(env) is None:
        check_port_free(aws_target.STANDIN_HOST, settings.standin_port, "FERRYMQ_STANDIN_PORT")
    # Owner-only from here on, for this process and every child (they inherit the umask); files left with wider
    # modes by earlier versions are brought down to the same.
    restrict_umask()
    private_dir(settings.data_dir)
    tighten_tree(settings.data_dir)
    secret_env = {}
    if not (env.get("FERRYMQ_CLUSTER_SECRET") or env.get(SECRET_FILE_ENV)):
        secret_env[SECRET_FILE_ENV] = str(ensure_secret_file(settings))
        settings = with_local_secret(settings)
    named = aws_target.named_endpoint(env)
    standin_start: Starting | None = None
    if named is None:
        try:
            # Free a moment ago (check_port_free), unless something took it since.
            standin_start, aws_endpoint = aws_target.launch_standin(settings, env, port=settings.standin_port)
        except OSError as exc:
            raise _port_taken(aws_target.STANDIN_HOST, settings.standin_port, "FERRYMQ_STANDIN_PORT", exc) from None
        children.append(standin_start.child)
        aws_env = aws_target.standin_environment(aws_endpoint, settings.region, aws_target.standin_key_pair(settings))
    else:
        aws_endpoint = named
        aws_env = aws_target.named_environment(named)
    aws_target.apply_environment(aws_env)
    settings = settings.with_(aws_endpoint_url=aws_endpoint)
    adopt_worker_per_partition_logs(settings)
    layouts = cluster_layouts(settings)
    # Push destinations on this machine (receivers under development) are allowed unless the operator chose.
    push_env = {} if PUSH_NETWORKS_ENV in env else {PUSH_NETWORKS_ENV: LOCAL_PUSH_NETWORKS}
    base_env = child_environment(env, FERRYMQ_DATA_DIR=str(settings.data_dir), **aws_env, **secret_env, **push_env)
    if standin:
        base_env.pop("AWS_SESSION_TOKEN", None)
    # The pool reads the workers' stderr for their last error: they must keep the format of a terminal if up has one.
    pool.env = {"FERRYMQ_LOG_FORMAT": "text" if _is_terminal(sys.stderr) else "json", **base_env}
    members = [(layout.name, w) for layout in layouts for w in layout.workers]
    argvs = {member: _worker_argv(settings, member, index) for index, member in enumerate(members)}
    launched: dict[tuple[str, str], tuple[int, ...]] = {}

    def launch(member: tuple[str, str], partitions: tuple[int, ...]) -> None:
        pool.launch(member[1], [*argvs[member], "--partitions", ",".join(map(str, partitions))], member[0])
        launched[member] = partitions

    # Every worker and the gateway start at once and are awaited together: a worker's start (imports, log
    # recovery) does not depend on another's, leadership goes to the preferred replica by the claim stagger
    # whatever the order, and the gateway serves a worker as soon as it answers. Each started child is held
    # (pool, children) before any wait, so a stop or a failed start stops them all. A stack started before is
    # launched before its AWS resources are checked (they exist; see held_partitions), a new one once they do.
    # They are launched while the stand-in starts (a second or more: moto's imports, its journal), since their
    # own start does not need it: its socket listens from the first, and what they ask it meanwhile waits there.
    held_before = held_partitions.read(settings.data_dir)
    gateway_start: _Gateways | None = None
    if held_before and all(member in held_before for member in members):
        for member in members:
            launch(member, held_before[member])
        gateway_start = _Gateways(settings, base_env, children)
    if standin_start is not None:
        standin_start.wait_ready(should_abort=stop.is_set, timeout=STANDIN_READY_TIMEOUT)
        aws_target.write_endpoint_file(settings, aws_endpoint)
    try:
        bootstrap(settings)
        seed_dev_credential(settings)
        # Stacks written by earlier versions kept secrets in the clear: seal them before anything serves.
        CredentialStore.from_settings(settings).seal_plaintext_secrets()
        replica_sets = {layout.name: ensure_replica_sets(settings, layout) for layout in layouts}
    except Exception as exc:
        raise StartupFailed(f"could not prepare FerryMQ's AWS resources at {aws_endpoint}: {exc}") from exc
    if stop.is_set():
        return None
    held = {
        # A worker holding nothing is a spare: the cluster's manager moves replicas of dead workers to it.
        member: tuple(p for p, rs in sorted(replica_sets[member[0]].items()) if member[1] in rs.replicas)
        for member in members
    }
    for member in members:
        if launched.get(member) != held[member]:
            launch(member, held[member])
    if held != held_before:
        held_partitions.write(settings.data_dir, held)
    if gateway_start is None:
        gateway_start = _Gateways(settings, base_env, children)
    gateway = _await_ready(gateway_start, pool, stop)
    if gateway is None:
        return None
    gateway_start.hand_over(children, pool)
    # Push hosts (event-source mappings), supervised like the workers: two, so a kill -9 of one moves its mappings
    # to the other within a lease. Started once the cluster serves, so they take no CPU from the workers' start.
    for index in range(PUSH_HOSTS):
        pool.launch(f"push-{index + 1}", python_module_argv("ferrymq.frontend.push", "--parent-pid", str(os.getpid())),
                    "push", PUSH_READY_PREFIX)
    endpoint = gateway.ready_fields[0]
    if declared is not None:
        _apply_declared(settings, endpoint, declared, out)
    stack_endpoint.record(settings, endpoint)
    print(banner(settings, endpoint, aws_endpoint, standin, pool.failing()), file=out, flush=True)
    return endpoint


def _worker_argv(settings: Settings, member: tuple[str, str], index: int) -> list[str]:
    """A worker's command line, but for the partitions it holds."""
    cluster, worker_id = member
    argv = python_module_argv("ferrymq.storage", "--worker-id", worker_id, "--cluster", cluster,
                              "--parent-pid", str(os.getpid()))
    # A fixed port is the first worker's; the others take the ones after it.
    if settings.worker_port:
        argv += ["--port", str(settings.worker_port + index)]
    if settings.worker_replication_port:
        argv += ["--replication-port", str(settings.worker_replication_port + index)]
    if settings.worker_admin_port:
        argv += ["--admin-port", str(settings.worker_admin_port + index)]
    return argv


class _Gateways:
    """The gateway processes being started: ``settings.gateway_processes`` of them, bound to one port (with
    ``SO_REUSEPORT`` when there are several). Each started child is held in ``children`` at once."""

    def __init__(self, settings: Settings, env: Mapping[str, str], children: list[Child]) -> None:
        count = settings.gateway_processes
        port = settings.port
        self._reservation: socket.socket | None = None
        if count > 1 and port == 0:
            # Port 0 would give each process a port of its own: one is picked here and held, by a socket that never
            # listens (so it takes no connection), until they all listen on it.
            self._reservation = asgi_serving.bind_socket(settings.host, 0, reuse_port=True, listen=False)
            port = self._reservation.getsockname()[1]
        self._argv = python_module_argv("ferrymq.infra.gateway", "--host", settings.host, "--port", str(port),
                                        "--parent-pid", str(os.getpid()))
        # The first collects the queue depths for them all (functions/frontend/siblings.py).
        self._envs = [{**env, "FERRYMQ_GATEWAY_PROCESSES": str(count),
                       **({"FERRYMQ_METRICS_COLLECT_SECONDS": "0"} if index else {})} for index in range(count)]
        self._starts: list[Starting] = []
        for index in range(count):
            starting = launch_child("gateway" if count == 1 else f"gateway-{index + 1}", self._argv,
                                    self._envs[index], GATEWAY_READY_PREFIX)
            children.append(starting.child)
            self._starts.append(starting)
        self._ready: dict[int, Child] = {}

    def hand_over(self, children: list[Child], pool: WorkerPool) -> None:
        """Once ready, several gateway processes are supervised by ``pool``: one that dies is started again with
        backoff while the others serve the port. A single gateway stays in ``children``: its end is the
        endpoint's, and ends the stack."""
        if len(self._starts) == 1:
            return
        for index, child in self._ready.items():
            children.remove(child)
            pool.adopt(child.name, child, self._argv, self._envs[index], "gateway", GATEWAY_READY_PREFIX)

    def poll(self) -> Child | None:
        """The first gateway once every one is ready (they all serve one URL), None until then; raises
        ChildFailed if one fails."""
        for index, starting in enumerate(self._starts):
            if index not in self._ready and (child := starting.poll()) is not None:
                self._ready[index] = child
        if len(self._ready) < len(self._starts):
            return None
        if self._reservation is not None:
            self._reservation.close()
            self._reservation = None
        return self._ready[0]


def _declared_queues(settings: Settings) -> list[declared_queues.DeclaredQueue] | None:
    """The queues file's entries, checked before anything starts (None without a file)."""
    if settings.queues_file is None:
        return None
    try:
        return declared_queues.load(settings.queues_file, region=settings.region, account=settings.account_id)
    except declared_queues.QueuesFileError as exc:
        raise StartupFailed(str(exc)) from None


def _apply_declared(settings: Settings, endpoint: str, declared: list[declared_queues.DeclaredQueue],
                    out: TextIO) -> None:
    """Create or update the declared queues before the stack says it is ready, so READY means they exist."""
    from ferrymq.infra.stack_client import clients

    sqs = clients(settings.with_(endpoint_url=endpoint)).sqs
    try:
        applied = declared_queues.apply(sqs, declared)
    except declared_queues.QueuesFileError as exc:
        raise StartupFailed(f"queues file {settings.queues_file}: {exc}") from None
    print(f"queues from {settings.queues_file}: {applied.summary()}", file=out, flush=True)


def _await_ready(gateway_start: _Gateways, pool: WorkerPool, stop: _StopRequest) -> Child | None:
    """The (first) gateway once the gateways and the workers are ready, or None if a stop was requested meanwhile.

    Every worker is awaited except those that failed to start (started again with backoff, not waited for), as
    long as a majority of each cluster's workers is ready; past ``RESTART_READY_TIMEOUT`` (counted again from each
    recovery progress line a worker writes) that majority is enough.
    Raises ChildFailed if a gateway fails, and StartupFailed if a cluster has no majority by then."""
    deadline = time.monotonic() + RESTART_READY_TIMEOUT
    gateway = None
    while not stop.is_set():
        if gateway is None:
            gateway = gateway_start.poll()
        pool.check()
        # Workers still recovering a large log, and saying so, are waited for as long as they get on.
        late = time.monotonic() > max(deadline, pool.progressed_at + RESTART_READY_TIMEOUT)
        if gateway is not None and pool.quorum_ready() and (late or pool.settled()):
            return gateway
        if late and gateway is not None:
            raise StartupFailed(
                f"no majority of the storage workers was ready within {RESTART_READY_TIMEOUT:.0f} s"
                + (f": {'; '.join(pool.failing())}" if pool.failing() else "")
            )
        stop.event.wait(READY_POLL_SECONDS)
    return None


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _supervise(children: list[Child], pool: WorkerPool, stop: _StopRequest) -> int:
    while not stop.event.wait(POLL_SECONDS):
        for child in children:
            status = child.exit_status()
            if status is not None:
                if stop.is_set():
                    return 0
                print(f"ferrymq: {child.name} (pid {child.pid}) exited unexpectedly with {signal_name(status)}; "
                      "stopping the stack", file=sys.stderr, flush=True)
                return 1
        pool.check()
    return 0
