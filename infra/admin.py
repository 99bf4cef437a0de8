"""Admin commands: access keys and bootstrap, against the same AWS state ``ferrymq up`` uses."""

from __future__ import annotations

import datetime
import json
import sys
from dataclasses import dataclass
from typing import TextIO

from ferrymq.aws.credentials import Credential, CredentialStore
from ferrymq.infra import cluster, membership
from ferrymq.infra.bootstrap import bootstrap
from ferrymq.settings import Settings


def _created(credential: Credential) -> str:
    return datetime.datetime.fromtimestamp(credential.created_at, datetime.UTC).isoformat(timespec="seconds")


def _expiration(credential: Credential) -> str:
    if credential.expires_at is None:
        return "-"
    return datetime.datetime.fromtimestamp(credential.expires_at, datetime.UTC).isoformat(timespec="seconds")


def _as_json(credential: Credential, with_secret: bool, session_token: str | None = None) -> dict[str, object]:
    document: dict[str, object] = {"AccessKeyId": credential.access_key_id}
    if with_secret:
        document["SecretAccessKey"] = credential.secret_access_key
    if session_token is not None:
        document["SessionToken"] = session_token
    document.update(
        {"AccountId": credential.account_id, "UserName": credential.user_name, "CreatedAt": _created(credential),
         "Status": credential.status}
    )
    if credential.expires_at is not None:
        document["Expiration"] = _expiration(credential)
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
    if as_json:
        print(json.dumps(_as_json(credential, with_secret=True, session_token=token)), file=out)
    else:
        print(f"access key id      {credential.access_key_id}", file=out)
        print(f"secret access key  {credential.secret_access_key}", file=out)
        if token is not None:
            print(f"session token      {token}", file=out)
            print(f"expires            {_expiration(credential)}", file=out)
        print(f"account            {credential.account_id}", file=out)
        print(f"user               {credential.user_name}", file=out)
        if credential.admin:
            print("admin              yes", file=out)
    return 0


def list_credentials(settings: Settings, as_json: bool, out: TextIO) -> int:
    credentials = CredentialStore.from_settings(settings).list()
    if as_json:
        print(json.dumps([_as_json(c, with_secret=False) for c in credentials]), file=out)
        return 0
    rows = [("ACCESS KEY ID", "ACCOUNT", "USER", "STATUS", "EXPIRES", "CREATED")]
    rows += [(c.access_key_id, c.account_id, c.user_name, c.status, _expiration(c), _created(c)) for c in credentials]
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        print("  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[5]]), file=out)
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
    else:
        for line in cluster.render(report):
            print(line, file=out)
    return 0


def cluster_init(settings: Settings, out: TextIO) -> int:
    for layout in cluster.cluster_layouts(settings):
        sets = cluster.ensure_replica_sets(settings, layout)
        for partition, rs in sorted(sets.items()):
            print(
                f"cluster {layout.name} partition {partition}: replicas {','.join(rs.replicas)}, acks {rs.acks.value}",
                file=out,
            )
    return 0
