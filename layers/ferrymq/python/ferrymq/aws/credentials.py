"""Access keys in DynamoDB.

Table ``settings.credentials_table``, one item per access key::

    access_key_id (S, hash key)  secret_sealed (B: the secret under a KMS envelope, ferrymq.aws.secret_box)
    account_id (S)  user_name (S)  created_at (N)
    status (S: Active | Inactive; absent: Active)
    admin (BOOL: the key may call FerryMQ's admin actions; absent: false)
    temporary keys only: session_token_sha256 (S)  expires_at (N)

and one item that is not a key, ``access_key_id = "#version"`` with ``version (N)``: every change that must
reach the front ends before their cached copies expire (delete, disable, enable, overwrite) adds one to it in
the same transaction, so a front end learns that something changed from one small read.  Creating a key does
not: front ends remember an unknown key only briefly.

Temporary credentials (``ASIA…``) work only with their session token, until their expiry.  Only the token's
SHA-256 is stored: it is checked, never needed back.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import string
import time
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ferrymq.aws import session
from ferrymq.aws.errors import translate_client_errors
from ferrymq.aws.secret_box import SecretBox
from ferrymq.settings import Settings

_KEY_ALPHABET = string.ascii_uppercase + "234567"
_SECRET_ALPHABET = string.ascii_letters + string.digits + "+/"
ACTIVE, INACTIVE = "Active", "Inactive"
# The key of the version item; access key ids are letters and digits, so none can collide with it.
VERSION_KEY = "#version"
# What AWS's GetSessionToken allows, but for the lower bound: a FerryMQ key may live for as little as a second.
MAX_TEMPORARY_SECONDS = 129_600
DEFAULT_TEMPORARY_SECONDS = 43_200


@dataclass(frozen=True, slots=True)
class Credential:
    access_key_id: str
    secret_access_key: str
    account_id: str
    user_name: str
    created_at: float = 0.0
    region: str = ""
    """The region of the request this key signed (its SigV4 credential scope), once verified; not stored."""
    status: str = ACTIVE
    session_token_sha256: str | None = None
    """Temporary credentials: the SHA-256 (hex) of their session token."""
    expires_at: float | None = None
    """Temporary credentials: when they stop working, in seconds since the epoch."""
    admin: bool = False
    """Whether the key may call FerryMQ's admin actions (cluster status, usage, access keys) and look at any
    account's queues through FerryMQ's own API; SQS actions it signs are authorised as any key's are."""

    @property
    def active(self) -> bool:
        return self.status == ACTIVE

    @property
    def temporary(self) -> bool:
        return self.session_token_sha256 is not None

    def accepts_token(self, token: str | None) -> bool:
        """Whether a request carrying ``token`` (None: no token) may use this key: a permanent key takes no
        token at all, a temporary one only its own."""
        if self.session_token_sha256 is None or token is None:
            return self.session_token_sha256 is None and token is None
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()
        return hmac.compare_digest(digest, self.session_token_sha256)

    @property
    def principal_id(self) -> str:
        """The id SQS reports as a message's SenderId: an IAM user's id, or the account for other keys."""
        return f"AIDA{self.access_key_id[4:]}" if self.access_key_id.startswith("AKIA") else self.account_id


class CredentialStore:
    """Secrets are stored sealed (``secret_sealed``, :mod:`ferrymq.aws.secret_box`); items written in the clear
    by earlier versions (``secret_access_key``) are still read, and sealed when next written or by
    :meth:`seal_plaintext_secrets`."""

    def __init__(self, client: Any, table_name: str, box: SecretBox | None = None) -> None:
        self._client = client
        self._table = table_name
        self._box = box or SecretBox.for_region(client.meta.region_name)

    @classmethod
    def from_settings(cls, settings: Settings) -> CredentialStore:
        return cls(session.client("dynamodb", settings), settings.credentials_table,
                   SecretBox(session.client("kms", settings)))

    def seal_plaintext_secrets(self) -> int:
        """Seal every secret an earlier version stored in the clear; returns how many. A key changed meanwhile
        (its clear secret no longer the one read) is left to that change."""
        sealed = 0
        with translate_client_errors():
            for page in self._client.get_paginator("scan").paginate(TableName=self._table):
                for item in page.get("Items", []):
                    if item["access_key_id"]["S"] == VERSION_KEY or "secret_access_key" not in item:
                        continue
                    try:
                        self._client.put_item(
                            TableName=self._table,
                            Item=_to_item(_from_item(item, self._box), self._box),
                            ConditionExpression="secret_access_key = :clear",
                            ExpressionAttributeValues={":clear": item["secret_access_key"]},
                        )
                    except ClientError as exc:
                        if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                            raise
                        continue
                    sealed += 1
        return sealed

    def get(self, access_key_id: str) -> Credential | None:
        if access_key_id == VERSION_KEY:
            return None
        with translate_client_errors():
            item = self._client.get_item(
                TableName=self._table, Key={"access_key_id": {"S": access_key_id}}, ConsistentRead=True
            ).get("Item")
        return _from_item(item, self._box) if item else None

    def put(self, credential: Credential) -> None:
        """Write ``credential`` as given, replacing any key of the same id (front ends learn of it)."""
        self._with_version_bump({"Put": {"TableName": self._table, "Item": _to_item(credential, self._box)}})

    def create(self, account_id: str, user_name: str, *, admin: bool = False) -> Credential:
        credential = _new_permanent(account_id, user_name, admin)
        with translate_client_errors():
            self._client.put_item(
                TableName=self._table,
                Item=_to_item(credential, self._box),
                ConditionExpression="attribute_not_exists(access_key_id)",
            )
        return credential

    def create_temporary(
        self, account_id: str, user_name: str, duration_seconds: int = DEFAULT_TEMPORARY_SECONDS, *,
        admin: bool = False,
    ) -> tuple[Credential, str]:
        """New temporary credentials and their session token, which is shown this once and never stored."""
        if not 1 <= duration_seconds <= MAX_TEMPORARY_SECONDS:
            raise ValueError(f"duration_seconds must be between 1 and {MAX_TEMPORARY_SECONDS}")
        token = base64.b64encode(secrets.token_bytes(192)).decode("ascii")
        now = time.time()
        credential = Credential(
            access_key_id="ASIA" + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(16)),
            secret_access_key="".join(secrets.choice(_SECRET_ALPHABET) for _ in range(40)),
            account_id=account_id,
            user_name=user_name,
            created_at=now,
            session_token_sha256=hashlib.sha256(token.encode("ascii")).hexdigest(),
            expires_at=now + duration_seconds,
            admin=admin,
        )
        with translate_client_errors():
            self._client.put_item(
                TableName=self._table,
                Item=_to_item(credential, self._box),
                ConditionExpression="attribute_not_exists(access_key_id)",
            )
        return credential, token

    def delete(self, access_key_id: str) -> bool:
        """Delete a key; False if there was none."""
        return self._change_existing(
            access_key_id,
            {"Delete": {"TableName": self._table, "Key": _key(access_key_id),
                        "ConditionExpression": "attribute_exists(access_key_id)"}},
        )

    def set_status(self, access_key_id: str, active: bool) -> bool:
        """Enable or disable a key; False if there is none."""
        return self._change_existing(
            access_key_id,
            {
                "Update": {
                    "TableName": self._table,
                    "Key": _key(access_key_id),
                    "ConditionExpression": "attribute_exists(access_key_id)",
                    "UpdateExpression": "SET #s = :s",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": {":s": {"S": ACTIVE if active else INACTIVE}},
                }
            },
        )

    def rotate(self, access_key_id: str) -> Credential | None:
        """A new permanent key for the same account, user and admin flag, and ``access_key_id`` disabled, in one
        transaction (front ends learn of it); None, and nothing changed, when there is no such key."""
        old = self.get(access_key_id)
        if old is None:
            return None
        new = _new_permanent(old.account_id, old.user_name, old.admin)
        create = {"Put": {"TableName": self._table, "Item": _to_item(new, self._box),
                          "ConditionExpression": "attribute_not_exists(access_key_id)"}}
        disable = {
            "Update": {
                "TableName": self._table,
                "Key": _key(access_key_id),
                "ConditionExpression": "attribute_exists(access_key_id)",
                "UpdateExpression": "SET #s = :s",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": {":s": {"S": INACTIVE}},
            }
        }
        try:
            self._with_version_bump(create, disable)
        except ClientError as exc:
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
            if reasons[1:2] == ["ConditionalCheckFailed"]:
                return None  # deleted since it was read
            raise
        return new

    def version(self) -> int:
        """The keys' version: it moves with every delete, disable, enable and overwrite."""
        with translate_client_errors():
            item = self._client.get_item(
                TableName=self._table, Key=_key(VERSION_KEY), ConsistentRead=True
            ).get("Item")
        return int(item["version"]["N"]) if item and "version" in item else 0

    def list(self) -> list[Credential]:
        out: list[Credential] = []
        with translate_client_errors():
            for page in self._client.get_paginator("scan").paginate(TableName=self._table):
                out.extend(
                    _from_item(item, self._box)
                    for item in page.get("Items", [])
                    if item["access_key_id"]["S"] != VERSION_KEY
                )
        return sorted(out, key=lambda c: (c.account_id, c.user_name, c.access_key_id))

    def _change_existing(self, access_key_id: str, change: dict[str, Any]) -> bool:
        if access_key_id == VERSION_KEY:
            return False
        try:
            self._with_version_bump(change)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
            if reasons[:1] == ["ConditionalCheckFailed"]:
                return False
            raise
        return True

    def _with_version_bump(self, *changes: dict[str, Any]) -> None:
        """Apply ``changes`` and move the version in one transaction: no front end can see one without the
        other."""
        bump = {
            "Update": {
                "TableName": self._table,
                "Key": _key(VERSION_KEY),
                "UpdateExpression": "ADD #v :one",
                "ExpressionAttributeNames": {"#v": "version"},
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        }
        with translate_client_errors():
            self._client.transact_write_items(TransactItems=[*changes, bump])


def _new_permanent(account_id: str, user_name: str, admin: bool) -> Credential:
    return Credential(
        access_key_id="AKIA" + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(16)),
        secret_access_key="".join(secrets.choice(_SECRET_ALPHABET) for _ in range(40)),
        account_id=account_id,
        user_name=user_name,
        created_at=time.time(),
        admin=admin,
    )


def _key(access_key_id: str) -> dict[str, Any]:
    return {"access_key_id": {"S": access_key_id}}


def _to_item(c: Credential, box: SecretBox) -> dict[str, Any]:
    item: dict[str, Any] = {
        "access_key_id": {"S": c.access_key_id},
        "secret_sealed": {"B": box.seal(c.secret_access_key, c.access_key_id)},
        "account_id": {"S": c.account_id},
        "user_name": {"S": c.user_name},
        "created_at": {"N": repr(c.created_at)},
        "status": {"S": c.status},
    }
    if c.session_token_sha256 is not None:
        item["session_token_sha256"] = {"S": c.session_token_sha256}
    if c.expires_at is not None:
        item["expires_at"] = {"N": repr(c.expires_at)}
    if c.admin:
        item["admin"] = {"BOOL": True}
    return item


def _from_item(item: dict[str, Any], box: SecretBox) -> Credential:
    key_id = item["access_key_id"]["S"]
    sealed = item.get("secret_sealed")
    return Credential(
        access_key_id=key_id,
        secret_access_key=box.open(sealed["B"], key_id) if sealed else item["secret_access_key"]["S"],
        account_id=item["account_id"]["S"],
        user_name=item["user_name"]["S"],
        created_at=float(item.get("created_at", {}).get("N", "0")),
        status=item.get("status", {}).get("S", ACTIVE),
        session_token_sha256=item["session_token_sha256"]["S"] if "session_token_sha256" in item else None,
        expires_at=float(item["expires_at"]["N"]) if "expires_at" in item else None,
        admin=item.get("admin", {}).get("BOOL", False),
    )
