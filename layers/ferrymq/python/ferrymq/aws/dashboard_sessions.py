"""The web dashboard's login sessions in DynamoDB, so that every front-end process (several gateways on one
port, or many function instances) knows every session.

Table ``settings.dashboard_sessions_table``, one item per session::

    access_key_id (S, hash key)   the key the session logged in with
    session (S, range key)        the SHA-256 (hex) of the session's random id, which only the cookie holds
    secret_proof (S)              HMAC-SHA256 of the key's secret under the session's id (hex): proves which
                                  secret the login gave without keeping it, and is useless without the id
    csrf_token (S)                the token the dashboard's page sends with every change
    created_ms (N)                when the session was opened, in ms: the oldest go first past the bound
    expires_at (N)                seconds since the epoch; also the table's TTL attribute, and compared here,
                                  since DynamoDB deletes expired items hours late and stand-ins never
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ferrymq.aws.errors import translate_client_errors


@dataclass(frozen=True, slots=True)
class StoredSession:
    access_key_id: str
    session_hash: str
    secret_proof: str
    csrf_token: str
    created_ms: int
    expires_at: int


class SessionTable:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self.table_name = table_name

    def put(self, session: StoredSession) -> None:
        with translate_client_errors():
            self._client.put_item(TableName=self.table_name, Item=_item(session))

    def get(self, access_key_id: str, session_hash: str) -> StoredSession | None:
        """The session, strongly consistent: a logout through another process is seen at once."""
        with translate_client_errors():
            found = self._client.get_item(TableName=self.table_name, Key=_key(access_key_id, session_hash),
                                          ConsistentRead=True).get("Item")
        return None if found is None else _session(found)

    def of_key(self, access_key_id: str) -> list[StoredSession]:
        """Every session ``access_key_id`` holds, expired or not."""
        sessions: list[StoredSession] = []
        start: dict[str, Any] | None = None
        while True:
            query: dict[str, Any] = {
                "TableName": self.table_name,
                "KeyConditionExpression": "access_key_id = :k",
                "ExpressionAttributeValues": {":k": {"S": access_key_id}},
                "ConsistentRead": True,
            }
            if start is not None:
                query["ExclusiveStartKey"] = start
            with translate_client_errors():
                page = self._client.query(**query)
            sessions.extend(_session(item) for item in page.get("Items", []))
            start = page.get("LastEvaluatedKey")
            if start is None:
                return sessions

    def delete(self, access_key_id: str, session_hash: str) -> None:
        with translate_client_errors():
            self._client.delete_item(TableName=self.table_name, Key=_key(access_key_id, session_hash))


def _key(access_key_id: str, session_hash: str) -> dict[str, Any]:
    return {"access_key_id": {"S": access_key_id}, "session": {"S": session_hash}}


def _item(session: StoredSession) -> dict[str, Any]:
    return {
        **_key(session.access_key_id, session.session_hash),
        "secret_proof": {"S": session.secret_proof},
        "csrf_token": {"S": session.csrf_token},
        "created_ms": {"N": str(session.created_ms)},
        "expires_at": {"N": str(session.expires_at)},
    }


def _session(item: dict[str, Any]) -> StoredSession:
    return StoredSession(
        access_key_id=item["access_key_id"]["S"],
        session_hash=item["session"]["S"],
        secret_proof=item["secret_proof"]["S"],
        csrf_token=item["csrf_token"]["S"],
        created_ms=int(item["created_ms"]["N"]),
        expires_at=int(item["expires_at"]["N"]),
    )
