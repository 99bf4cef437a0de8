"""Access keys in DynamoDB.

Table ``settings.credentials_table``, one item per access key::

    access_key_id (S, hash key)  secret_access_key (S)  account_id (S)  user_name (S)  created_at (N)
"""

from __future__ import annotations

import secrets
import string
import time
from dataclasses import dataclass
from typing import Any

from ferrymq.aws import session
from ferrymq.aws.errors import translate_client_errors
from ferrymq.settings import Settings

_KEY_ALPHABET = string.ascii_uppercase + "234567"
_SECRET_ALPHABET = string.ascii_letters + string.digits + "+/"


@dataclass(frozen=True, slots=True)
class Credential:
    access_key_id: str
    secret_access_key: str
    account_id: str
    user_name: str
    created_at: float = 0.0
    region: str = ""
    """The region of the request this key signed (its SigV4 credential scope), once verified; not stored."""

    @property
    def principal_id(self) -> str:
        """The id SQS reports as a message's SenderId: an IAM user's id, or the account for other keys."""
        return f"AIDA{self.access_key_id[4:]}" if self.access_key_id.startswith("AKIA") else self.account_id


class CredentialStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    @classmethod
    def from_settings(cls, settings: Settings) -> CredentialStore:
        return cls(session.client("dynamodb", settings), settings.credentials_table)

    def get(self, access_key_id: str) -> Credential | None:
        with translate_client_errors():
            item = self._client.get_item(
                TableName=self._table, Key={"access_key_id": {"S": access_key_id}}, ConsistentRead=True
            ).get("Item")
        return _from_item(item) if item else None

    def put(self, credential: Credential) -> None:
        with translate_client_errors():
            self._client.put_item(TableName=self._table, Item=_to_item(credential))

    def create(self, account_id: str, user_name: str) -> Credential:
        credential = Credential(
            access_key_id="AKIA" + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(16)),
            secret_access_key="".join(secrets.choice(_SECRET_ALPHABET) for _ in range(40)),
            account_id=account_id,
            user_name=user_name,
            created_at=time.time(),
        )
        with translate_client_errors():
            self._client.put_item(
                TableName=self._table,
                Item=_to_item(credential),
                ConditionExpression="attribute_not_exists(access_key_id)",
            )
        return credential

    def delete(self, access_key_id: str) -> bool:
        with translate_client_errors():
            old = self._client.delete_item(
                TableName=self._table, Key={"access_key_id": {"S": access_key_id}}, ReturnValues="ALL_OLD"
            ).get("Attributes")
        return bool(old)

    def list(self) -> list[Credential]:
        out: list[Credential] = []
        with translate_client_errors():
            for page in self._client.get_paginator("scan").paginate(TableName=self._table):
                out.extend(_from_item(item) for item in page.get("Items", []))
        return sorted(out, key=lambda c: (c.account_id, c.user_name, c.access_key_id))


def _to_item(c: Credential) -> dict[str, Any]:
    return {
        "access_key_id": {"S": c.access_key_id},
        "secret_access_key": {"S": c.secret_access_key},
        "account_id": {"S": c.account_id},
        "user_name": {"S": c.user_name},
        "created_at": {"N": repr(c.created_at)},
    }


def _from_item(item: dict[str, Any]) -> Credential:
    return Credential(
        access_key_id=item["access_key_id"]["S"],
        secret_access_key=item["secret_access_key"]["S"],
        account_id=item["account_id"]["S"],
        user_name=item["user_name"]["S"],
        created_at=float(item.get("created_at", {}).get("N", "0")),
    )
