"""Admin commands: access keys and bootstrap, against the same AWS state ``ferrymq up`` uses."""

from __future__ import annotations

import datetime
import json
from typing import TextIO

from ferrymq.aws.credentials import Credential, CredentialStore
from ferrymq.settings import Settings
from infra import cluster
from infra.bootstrap import bootstrap


def _created(credential: Credential) -> str:
    return datetime.datetime.fromtimestamp(credential.created_at, datetime.UTC).isoformat(timespec="seconds")


def _as_json(credential: Credential, with_secret: bool) -> dict[str, object]:
    document: dict[str, object] = {"AccessKeyId": credential.access_key_id}
    if with_secret:
        document["SecretAccessKey"] = credential.secret_access_key
    document.update(
        {"AccountId": credential.account_id, "UserName": credential.user_name, "CreatedAt": _created(credential)}
    )
    return document


def create_credentials(settings: Settings, account_id: str, user_name: str, as_json: bool, out: TextIO) -> int:
    credential = CredentialStore.from_settings(settings).create(account_id, user_name)
    if as_json:
        print(json.dumps(_as_json(credential, with_secret=True)), file=out)
    else:
        print(f"access key id      {credential.access_key_id}", file=out)
        print(f"secret access key  {credential.secret_access_key}", file=out)
        print(f"account            {credential.account_id}", file=out)
        print(f"user               {credential.user_name}", file=out)
    return 0


def list_credentials(settings: Settings, as_json: bool, out: TextIO) -> int:
    credentials = CredentialStore.from_settings(settings).list()
    if as_json:
        print(json.dumps([_as_json(c, with_secret=False) for c in credentials]), file=out)
        return 0
    rows = [("ACCESS KEY ID", "ACCOUNT", "USER", "CREATED")]
    rows += [(c.access_key_id, c.account_id, c.user_name, _created(c)) for c in credentials]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[3]]), file=out)
    return 0


def delete_credentials(settings: Settings, access_key_id: str, out: TextIO, err: TextIO) -> int:
    if CredentialStore.from_settings(settings).delete(access_key_id):
        print(f"deleted {access_key_id}", file=out)
        return 0
    print(f"ferrymq: no access key {access_key_id}", file=err)
    return 1


def run_bootstrap(settings: Settings, endpoint: str, out: TextIO) -> int:
    bootstrap(settings)
    print(f"FerryMQ's tables, bucket and key are in place at {endpoint}", file=out)
    return 0


def cluster_status(settings: Settings, as_json: bool, out: TextIO) -> int:
    report = cluster.status(settings)
    if as_json:
        print(json.dumps(report), file=out)
    else:
        for line in cluster.render(report):
            print(line, file=out)
    return 0


def cluster_init(settings: Settings, out: TextIO) -> int:
    sets = cluster.ensure_replica_sets(settings, cluster.worker_ids(settings.workers))
    for partition, rs in sorted(sets.items()):
        print(f"partition {partition}: replicas {','.join(rs.replicas)}, acks {rs.acks.value}", file=out)
    return 0
