"""The ``ferrymq`` command: ``up`` runs the local stack; ``credentials``, ``bootstrap`` and ``cluster`` administer
its state directly; ``queues``, ``accounts``, ``keys`` and ``usage`` go through the running front end with the
admin key (:mod:`ferrymq.infra.stack_client`); ``log`` works on a stopped storage worker's log directory;
``spark`` runs a usage job against the stack's S3. Every command's ``--help`` ends with the environment variables
it reads (:mod:`ferrymq.infra.cli_env`); errors are one line on stderr.

Settings come from ``FERRYMQ_*`` variables, read once here. AWS calls go to ``AWS_ENDPOINT_URL`` (or
``FERRYMQ_AWS_ENDPOINT_URL``) when set, otherwise to the durable stand-in in ``FERRYMQ_DATA_DIR/aws``; see
:mod:`ferrymq.infra.aws_target`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import NoReturn, TextIO

from botocore.exceptions import BotoCoreError, ClientError

from ferrymq import logs
from ferrymq.accounts import ACCOUNT_ID_RULE, is_account_id
from ferrymq.aws.credentials import DEFAULT_TEMPORARY_SECONDS, MAX_TEMPORARY_SECONDS
from ferrymq.errors import ServiceUnavailable, SqsError
from ferrymq.infra import admin, aws_target, cli_keys, cli_push, cli_queues
from ferrymq.infra.bootstrap import bootstrap
from ferrymq.infra.children import ChildFailed
from ferrymq.infra.cli_env import ALL_FIELDS, ENDPOINT_FIELDS, STATE_FIELDS, epilog
from ferrymq.infra.cli_output import Output, error
from ferrymq.infra.cluster_secret import with_local_secret
from ferrymq.infra.stack_client import NoStack, clients
from ferrymq.settings import Settings

SPARK_JOBS = ("billing", "analytics", "report")
SPARK_PACKAGES = ("pyspark", "pyarrow")
"""What the usage jobs import beyond FerryMQ's runtime (the ``spark`` extra), checked before anything starts."""
SPARK_INSTALL = "pip install 'ferrymq[spark]' (in a checkout: make install-spark)"
API_COMMANDS = ("queues", "accounts", "keys", "usage", "push")
_CLUSTER_FIELDS = (*STATE_FIELDS, "cluster", "clusters", "workers", "partitions", "replication_factor", "acks",
                   "worker_grace_seconds", "cluster_secret")
_COMMAND_FIELDS: dict[str, tuple[str, ...]] = {
    "up": ALL_FIELDS,
    "bootstrap": (*STATE_FIELDS, "usage_bucket", "managed_sse_key"),
    "cluster": _CLUSTER_FIELDS,
    "credentials": STATE_FIELDS,
    "log": (),
    "spark": (*STATE_FIELDS, "usage_bucket"),
    **dict.fromkeys(API_COMMANDS, ENDPOINT_FIELDS),
}
_LOG_LEVEL = ("FERRYMQ_LOG_LEVEL", "default WARNING: what the command itself logs on stderr (FERRYMQ_LOG_FORMAT: text)")


class _Parser(argparse.ArgumentParser):
    """Refuses bad arguments in one line, with where to look."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _with_environment(parser: argparse.ArgumentParser, fields: tuple[str, ...]) -> None:
    """Give ``parser`` and every command below it the list of the variables behind ``fields``."""
    parser.epilog = epilog(fields, extra=[_LOG_LEVEL])
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _with_environment(child, fields)


def _parser() -> argparse.ArgumentParser:
    parser = _build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                _with_environment(command, _COMMAND_FIELDS[name])
    return parser


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ferrymq", description="FerryMQ, a message queue that speaks the SQS API.")
    parser.add_argument("--version", action="version", version=f"ferrymq {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    up = commands.add_parser("up", help="run the whole stack locally, in the foreground",
                             description="Run the whole stack locally, in the foreground: the AWS stand-in, the "
                             "storage workers and the gateway. Everything else is set through the environment.")
    up.add_argument("--queues", type=Path, metavar="FILE",
                    help="a YAML file of queues (attributes, deadLetterQueue, tags) to create or update once the "
                    "stack serves; a bad entry stops up before anything starts (default FERRYMQ_QUEUES_FILE)")
    commands.add_parser("bootstrap", help="create FerryMQ's tables, bucket and key (idempotent)")
    cluster = commands.add_parser("cluster", help="the storage cluster")
    cluster_actions = cluster.add_subparsers(dest="action", required=True, metavar="ACTION")
    cluster_status = cluster_actions.add_parser(
        "status", help="workers (alive, address, partitions led) and partitions (leader, epoch, ISR, lag)"
    )
    cluster_status.add_argument("--json", action="store_true", help="print one JSON object")
    cluster_status.add_argument(
        "--cluster", help="the cluster to show in detail (default FERRYMQ_CLUSTER); every cluster is listed"
    )
    add_worker = cluster_actions.add_parser(
        "add-worker",
        help="move a fair share of the cluster's replicas to a newly started worker that holds none yet, each "
        "copied and in sync before the replica it replaces is dropped",
    )
    add_worker.add_argument("worker_id", metavar="WORKER_ID", help="the new worker, already running")
    add_worker.add_argument("--cluster", help="its cluster (default FERRYMQ_CLUSTER)")
    add_worker.add_argument(
        "--catch-up-seconds", type=float, default=120.0, help="how long a new replica may take to catch up"
    )
    remove_worker = cluster_actions.add_parser(
        "remove-worker",
        help="take a worker out of the cluster for good: its leaderships move first, then each of its replicas "
        "to the live worker that keeps the counts even, copied and in sync before its own is dropped",
    )
    remove_worker.add_argument("worker_id", metavar="WORKER_ID", help="the worker to remove")
    remove_worker.add_argument("--cluster", help="its cluster (default FERRYMQ_CLUSTER)")
    remove_worker.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    remove_worker.add_argument("--json", action="store_true", help="print what moved as one JSON object")
    remove_worker.add_argument(
        "--catch-up-seconds", type=float, default=120.0, help="how long a new replica may take to catch up"
    )
    remove_worker.add_argument(
        "--handover-seconds", type=float, default=60.0, help="how long a leadership may take to leave the worker"
    )
    cluster_actions.add_parser(
        "init",
        help="give every partition a replica set over FERRYMQ_WORKERS workers (worker-0..), "
        "FERRYMQ_REPLICATION_FACTOR replicas each, for each of FERRYMQ_CLUSTERS clusters, and register the clusters "
        "for queue placement (idempotent; `up` does it on every start)",
    )
    credentials = commands.add_parser("credentials", help="manage access keys")
    actions = credentials.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create an access key and print it with its secret")
    create.add_argument("--account", required=True, type=_account_id, help="12-digit account id the key belongs to")
    create.add_argument("--user", required=True, help="user name recorded with the key")
    create.add_argument("--json", action="store_true", help="print one JSON object")
    create.add_argument("--admin", action="store_true",
                        help="an admin key: FerryMQ's admin actions, any queue's statistics and peeks")
    create.add_argument("--temporary", action="store_true",
                        help="temporary credentials: an ASIA key that works only with the session token printed "
                        "with it, until it expires")
    create.add_argument("--duration-seconds", type=_duration, metavar="N",
                        help=f"how long temporary credentials work, 1..{MAX_TEMPORARY_SECONDS} "
                        f"(default {DEFAULT_TEMPORARY_SECONDS})")
    listing = actions.add_parser("list", help="list access keys (without secrets)")
    listing.add_argument("--json", action="store_true", help="print one JSON array")
    delete = actions.add_parser("delete", help="delete an access key")
    delete.add_argument("key_id", metavar="KEY_ID")
    for verb in ("disable", "enable"):
        actions.add_parser(verb, help=f"{verb} an access key (it keeps its secret)").add_argument(
            "key_id", metavar="KEY_ID")
    log_group = commands.add_parser("log", help="work on a stopped storage worker's log")
    log_actions = log_group.add_subparsers(dest="action", required=True, metavar="ACTION")
    salvage = log_actions.add_parser(
        "salvage", help="cut the damaged ranges of a log, keeping every intact record, and print what was cut"
    )
    salvage.add_argument(
        "--data-dir",
        required=True,
        type=Path,
        metavar="DIR",
        help="a partition's log directory, e.g. $FERRYMQ_DATA_DIR/workers/worker-0/p0 (the worker must be stopped)",
    )
    salvage.add_argument("--dry-run", action="store_true", help="only report what would be cut")
    salvage.add_argument("--json", action="store_true", help="print one JSON object")
    spark_job = commands.add_parser(
        "spark", help="run usage jobs (billing, analytics, report, or all) in local Spark against the stack's S3"
    )
    spark_job.add_argument("job", nargs="+", choices=(*SPARK_JOBS, "all"), metavar="JOB",
                           help=f"{', '.join(SPARK_JOBS)} or all; several run in one Spark session, in that order")
    spark_job.add_argument("--date", required=True, type=_job_date,
                           help="the day to process, YYYY-MM-DD (UTC), or today / yesterday")
    spark_job.add_argument("--input", help="usage prefix (default s3://$FERRYMQ_USAGE_BUCKET/usage/v1)")
    spark_job.add_argument("--output", help="output prefix (default s3://$FERRYMQ_USAGE_BUCKET/derived)")
    spark_job.add_argument("--prices", help="price table for billing (default spark/prices.json)")
    spark_job.add_argument("--master", help="Spark master (default local[2])")
    cli_queues.add_parsers(commands)
    cli_keys.add_parsers(commands, _account_id, _duration)
    cli_push.add_parsers(commands)
    return parser


def _version() -> str:
    try:
        return importlib.metadata.version("ferrymq")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _account_id(text: str) -> str:
    if not is_account_id(text):
        raise argparse.ArgumentTypeError(f"{ACCOUNT_ID_RULE}, not {text!r}")
    return text


def _duration(text: str) -> int:
    seconds = int(text)
    if not 1 <= seconds <= MAX_TEMPORARY_SECONDS:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_TEMPORARY_SECONDS}")
    return seconds


def _job_date(text: str) -> str:
    """Checked before a stand-in is started for the job (the job resolves today / yesterday itself)."""
    if text not in ("today", "yesterday"):
        date.fromisoformat(text)
    return text


def missing_spark_packages() -> list[str]:
    """The packages of the ``spark`` extra this interpreter cannot import (found without importing them)."""
    import importlib.util

    return [name for name in SPARK_PACKAGES if importlib.util.find_spec(name) is None]


def _spark(settings: Settings, args: argparse.Namespace) -> int:
    """Run a job's entry in this process, on the S3 endpoint the admin target resolved (already in the env)."""
    import importlib

    argv = [
        "--input", args.input or f"s3://{settings.usage_bucket}/usage/v1",
        "--output", args.output or f"s3://{settings.usage_bucket}/derived",
        "--date", args.date,
    ]
    if args.master:
        argv += ["--master", args.master]
    jobs = [job for job in SPARK_JOBS if job in args.job or "all" in args.job]
    if args.prices and "billing" in jobs:
        argv += ["--prices", args.prices]
    # Several jobs share one session and one read of the usage: Spark's start-up dominates a small day.
    entry = jobs[0] if len(jobs) == 1 else "daily"
    if entry == "daily":
        argv += ["--jobs", ",".join(jobs)]
    return int(importlib.import_module(f"ferrymq.spark.jobs.{entry}").main(argv))


def _salvage(directory: Path, dry_run: bool, as_json: bool, out: TextIO, err: TextIO) -> int:
    from ferrymq.storage.log.lock import DirectoryInUse
    from ferrymq.storage.log.salvage import SalvageRefused, salvage

    try:
        report = salvage(directory, dry_run=dry_run)
    except (DirectoryInUse, SalvageRefused, OSError) as exc:
        print(f"ferrymq: log salvage: {exc}", file=err)
        return 1
    if as_json:
        print(json.dumps(report.as_dict()), file=out)
    else:
        for line in report.lines():
            print(line, file=out)
    return 0


def _admin(settings: Settings, command: Callable[[Settings, str], int]) -> int:
    """Run an admin command against the stack's AWS state."""
    try:
        with aws_target.admin_target(settings, os.environ) as target:
            aws_target.apply_environment(target.environment)
            settings = settings.with_(aws_endpoint_url=target.endpoint)
            if target.temporary:
                # The stack's own state, possibly never bootstrapped yet; bootstrapping it is idempotent.
                bootstrap(settings)
            return command(settings, target.endpoint)
    except ChildFailed as exc:
        print(f"ferrymq: could not start the AWS stand-in: {exc}", file=sys.stderr)
    except (BotoCoreError, ClientError, SqsError) as exc:
        print(f"ferrymq: AWS call failed: {exc}", file=sys.stderr)
        if isinstance(exc, ServiceUnavailable):
            print("ferrymq: are FerryMQ's tables there? `ferrymq bootstrap` creates them", file=sys.stderr)
    return 1


def _api(settings: Settings, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run a command that talks to the running front end; any failure is one line on ``err``."""
    output = Output(getattr(args, "json", False), out, err)
    endpoint = "FerryMQ"
    try:
        stack = clients(settings)
        endpoint = stack.endpoint
        if args.command == "queues":
            return cli_queues.run(stack, args, output, sys.stdin)
        if args.command == "push":
            return cli_push.run(stack, args, output, sys.stdin)
        return cli_keys.run(stack, args, output, sys.stdin)
    except NoStack as exc:
        error(err, str(exc))
    except ClientError as exc:
        details = exc.response.get("Error", {})
        code = str(details.get("Code", "Error"))
        if code.startswith("AWS.SimpleQueueService."):
            code = details.get("QueryErrorCode") or code  # SQS's legacy code: its short name reads better
        error(err, f"{code}: {details.get('Message') or exc}")
    except BotoCoreError as exc:
        error(err, f"cannot reach FerryMQ at {endpoint}: {exc}")
    except ValueError as exc:
        error(err, str(exc))
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): say nothing more, and let the interpreter's final flush fail quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        error(sys.stderr, str(exc))
        return 2
    if args.command == "up":
        # The stack's supervisor: its lines join its children's in the stack's log stream (the banner stays human).
        logs.configure("up", settings)
    else:
        logs.configure("cli", settings, default_format="text", default_level="WARNING")
    out, err = sys.stdout, sys.stderr
    if args.command == "log":
        return _salvage(args.data_dir, args.dry_run, args.json, out, err)
    # Admin commands on a local stack's data directory talk to its workers with its cluster secret.
    settings = with_local_secret(settings)
    if args.command == "up":
        from ferrymq.infra.local_stack import run_up

        if args.queues is not None:
            settings = settings.with_(queues_file=args.queues)
        return run_up(settings, os.environ, out)
    if args.command in API_COMMANDS:
        return _api(settings, args, out, err)
    if args.command == "spark":
        missing = missing_spark_packages()
        if missing:
            # `make up` installs what running the stack needs; the jobs' packages are an extra.
            print(f"ferrymq: the Spark jobs need {' and '.join(missing)}, which are not installed: {SPARK_INSTALL}",
                  file=err)
            return 1
        return _admin(settings, lambda s, _: _spark(s, args))
    if args.command == "bootstrap":
        return _admin(settings, lambda s, endpoint: admin.run_bootstrap(s, endpoint, out))
    if args.command == "cluster":
        if args.action == "init":
            return _admin(settings, lambda s, _: admin.cluster_init(s, out))
        if args.action == "add-worker":
            return _admin(
                settings,
                lambda s, _: admin.cluster_add_worker(s, args.worker_id, args.cluster, args.catch_up_seconds, out),
            )
        if args.action == "remove-worker":
            options = admin.RemoveWorkerOptions(args.cluster, args.yes, args.json, args.catch_up_seconds,
                                                args.handover_seconds)
            return _admin(
                settings, lambda s, _: admin.cluster_remove_worker(s, args.worker_id, options, out, err, sys.stdin)
            )
        return _admin(settings, lambda s, _: admin.cluster_status(s, args.json, out, args.cluster))
    if args.action == "create":
        if args.duration_seconds is not None and not args.temporary:
            print("ferrymq: --duration-seconds is for --temporary credentials", file=err)
            return 2
        duration = (args.duration_seconds or DEFAULT_TEMPORARY_SECONDS) if args.temporary else None
        return _admin(settings, lambda s, _: admin.create_credentials(s, args.account, args.user, args.json, out,
                                                                      duration_seconds=duration, admin=args.admin))
    if args.action == "list":
        return _admin(settings, lambda s, _: admin.list_credentials(s, args.json, out))
    if args.action in ("disable", "enable"):
        active = args.action == "enable"
        return _admin(settings, lambda s, _: admin.set_credentials_status(s, args.key_id, active, out, err))
    return _admin(settings, lambda s, _: admin.delete_credentials(s, args.key_id, out, err))


if __name__ == "__main__":
    sys.exit(main())
