"""Admin commands: access keys and bootstrap, against the same AWS state ``ferrymq up`` uses."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from ferrymq.aws.credentials import Credential, CredentialStore
from ferrymq.infra import cli_keys, cluster, membership
from ferrymq.infra.bootstrap import bootstrap
from ferrymq.infra.cli_output import Output, utc
from ferrymq.settings import Settings


def _as_json(credential: Credential, with_secret: bool, session_token: str | None = None) -> dict[str, object]:
    document: dict[str, object] = {"AccessKeyId": credential.access_key_id}
    if with_secret:
        document["SecretAccessKey"] = credential.secret_access_key
    if session_token is not None:
        document["SessionToken"] = session_token
    document.update(
        {"AccountId": credential.account_id, "UserName": credential.user_name, "CreatedAt": utc(credential.created_at),
         "Status": credential.status}
    )
    if credential.expires_at is not None:
        document["Expiration"] = utc(credential.expires_at)
    if credential.admin:
        document["Admin"] = True
    return document


def create_credentials(settings: Settings, account_id: str, user_name: str, as_json: bool, out: TextIO,
                       duration_seconds: int | None = None, admin: bool = False) -> int:
    """A permanent access key, or temporary credentials (with a session token) when ``duration_seconds`` is
    given; an admin key with ``admin``."""
    store = CredentialStore.from_settings(settings)
    token: str | None = None
    if duration_seconds is None:
        credential = store.create(account_id, user_name, admin=admin)
    else:
        credential, token = store.create_temporary(account_id, user_name, duration_seconds, admin=admin)
    # Printed as `ferrymq keys create` prints the keys it makes.
    return cli_keys.print_created(_as_json(credential, with_secret=True, session_token=token),
                                  Output(as_json, out, sys.stderr))


def list_credentials(settings: Settings, as_json: bool, out: TextIO) -> int:
    credentials = CredentialStore.from_settings(settings).list()
    keys = [_as_json(c, with_secret=False) for c in credentials]
    # The same table as `ferrymq keys list`; the JSON stays the array it has always been.
    Output(as_json, out, sys.stderr).table(keys, cli_keys.KEY_COLUMNS, cli_keys.key_rows(keys), empty="no access keys")
    return 0


def delete_credentials(settings: Settings, access_key_id: str, out: TextIO, err: TextIO) -> int:
    if CredentialStore.from_settings(settings).delete(access_key_id):
        print(f"deleted {access_key_id}", file=out)
        return 0
    print(f"ferrymq: no access key {access_key_id}", file=err)
    return 1


def set_credentials_status(settings: Settings, access_key_id: str, active: bool, out: TextIO, err: TextIO) -> int:
    """Enable or disable a key: a disabled key is refused as an unknown one is, and keeps its secret."""
    if CredentialStore.from_settings(settings).set_status(access_key_id, active):
        print(f"{'enabled' if active else 'disabled'} {access_key_id}", file=out)
        return 0
    print(f"ferrymq: no access key {access_key_id}", file=err)
    return 1


def run_bootstrap(settings: Settings, endpoint: str, out: TextIO) -> int:
    bootstrap(settings)
    print(f"FerryMQ's tables, bucket and key are in place at {endpoint}", file=out)
    return 0


def cluster_add_worker(settings: Settings, worker_id: str, name: str | None, catch_up_seconds: float,
                       out: TextIO) -> int:
    try:
        membership.add_worker(settings, worker_id, name or settings.cluster, catch_up_seconds=catch_up_seconds,
                              say=lambda line: print(line, file=out, flush=True))
    except membership.MembershipChangeFailed as exc:
        print(f"ferrymq: {exc}", file=sys.stderr)
        return 1
    return 0


@dataclass(frozen=True)
class RemoveWorkerOptions:
    """``ferrymq cluster remove-worker``'s flags."""

    cluster: str | None = None
    yes: bool = False
    as_json: bool = False
    catch_up_seconds: float = 120.0
    handover_seconds: float = 60.0


def cluster_remove_worker(settings: Settings, worker_id: str, options: RemoveWorkerOptions, out: TextIO,
                          err: TextIO, stdin: TextIO) -> int:
    """Plan (refusing what cannot be done), confirm on a terminal unless ``--yes``, then remove."""
    try:
        removal = membership.plan_removal(settings, worker_id, options.cluster or settings.cluster)
        if not options.yes and not _confirmed(removal, err, stdin):
            return 1
        say = (lambda _: None) if options.as_json else (lambda line: print(line, file=out, flush=True))
        result = membership.remove_worker(settings, removal, catch_up_seconds=options.catch_up_seconds,
                                          handover_seconds=options.handover_seconds, say=say)
    except membership.MembershipChangeFailed as exc:
        print(f"ferrymq: {exc}", file=err)
        return 1
    if options.as_json:
        print(json.dumps(result), file=out)
    return 0


def _confirmed(removal: membership.Removal, err: TextIO, stdin: TextIO) -> bool:
    if not stdin.isatty():
        print(f"ferrymq: removing worker {removal.worker_id} moves its replicas and leaderships; without a "
              f"terminal to confirm on, pass --yes", file=err)
        return False
    for line in removal.describe():
        print(line, file=err)
    print(f"remove worker {removal.worker_id} from cluster {removal.cluster}? [y/N] ", end="", file=err, flush=True)
    if stdin.readline().strip().lower() in ("y", "yes"):
        return True
    print("ferrymq: nothing changed", file=err)
    return False


def cluster_status(settings: Settings, as_json: bool, out: TextIO, name: str | None = None) -> int:
    report = cluster.status(settings, cluster=name)
    if as_json:
        print(json.dumps(report), file=out)
        return 0
    print_cluster_status(report, out)
    return 0


def print_cluster_status(report: dict[str, Any], out: TextIO) -> None:
    """``report`` in the tables every admin command prints, then the notes on damaged copies."""
    output = Output(False, out, sys.stderr)
    tables, notes = cluster.render(report)
    for table in tables:
        output.table(None, table.columns, table.rows, title=table.title)
    for note in notes:
        print(note, file=out)


def cluster_init(settings: Settings, out: TextIO) -> int:
    for layout in cluster.cluster_layouts(settings):
        sets = cluster.ensure_replica_sets(settings, layout)
        for partition, rs in sorted(sets.items()):
            print(
                f"cluster {layout.name} partition {partition}: replicas {','.join(rs.replicas)}, acks {rs.acks.value}",
                file=out,
            )
    return 0
