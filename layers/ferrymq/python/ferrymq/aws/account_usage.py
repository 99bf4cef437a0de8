"""How much of the storage each account holds: its queues and their shards, counted against per-account limits.

Items live in the queues table (``settings.queues_table``) under the pseudo-account ``#usage`` (real accounts
are 12 digits, so no caller's Query can name it, and the catalog's scan skips it), one per account::

    attribute   type  meaning
    account     S     ``#usage``
    name        S     the account id
    queues      N     the account's queues, created and not deleted
    shards      N     the shards of those queues (a queue of FerryMQShardCount n counts n)

Both move only by a conditional ``ADD`` in one write: taking units for a new queue (or for shards a queue
grows by) is refused once either count would pass its limit, so concurrent CreateQueue and SetQueueAttributes
calls, on one front end or many, can never take an account past a limit between them. A missing item is
written once, by a conditional put, from a count of the account's queues (:meth:`AccountUsageStore.seed`),
so queues made before the counts existed are counted too. A front end that dies between taking units and
writing the queue leaves the counts high, on the safe side, as the cluster registry does.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ferrymq.aws.errors import outages_or_internal

log = logging.getLogger(__name__)

USAGE_ACCOUNT = "#usage"
"""The pseudo-account of the usage items; a real account id is 12 digits and can never equal it."""


@dataclass(frozen=True, slots=True)
class AccountUsage:
    account: str
    queues: int
    shards: int


class UsageNotCounted(Exception):
    """The account has no usage item yet: it must be seeded before units are taken."""


class OverAccountLimit(Exception):
    """Taking the units asked for would pass one of the account's limits; ``usage`` is the count as read."""

    def __init__(self, usage: AccountUsage) -> None:
        super().__init__(usage.account)
        self.usage = usage


class AccountUsageStore:
    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self.table_name = table_name

    def get(self, account: str) -> AccountUsage | None:
        """The account's counts (strongly consistent), None when they were never counted."""
        with _translated():
            item = self._client.get_item(TableName=self.table_name, Key=_key(account), ConsistentRead=True).get("Item")
        return _decode(item) if item else None

    def seed(self, account: str, queues: int, shards: int) -> None:
        """Start the account's counts at what it holds, unless another writer started them first."""
        with _translated():
            try:
                self._client.put_item(
                    TableName=self.table_name,
                    Item={**_key(account), "queues": {"N": str(queues)}, "shards": {"N": str(shards)}},
                    ConditionExpression="attribute_not_exists(#n)",
                    ExpressionAttributeNames={"#n": "name"},
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise
                # Another front end seeded it first: its count stands, and units are taken on top of it.

    def take(self, account: str, queues: int, shards: int, *, max_queues: int, max_shards: int) -> AccountUsage:
        """Count ``queues`` more queues and ``shards`` more shards; OverAccountLimit when either count would pass
        its limit (a count that is not added to is not checked), UsageNotCounted when there are no counts yet.

        Condition expressions have no arithmetic: the limits are brought down by what is added instead.
        """
        conditions = ["attribute_exists(#n)"]
        numbers = {":q": queues, ":s": shards}
        if queues:
            conditions.append("#q <= :ql")
            numbers[":ql"] = max_queues - queues
        if shards:
            conditions.append("#s <= :sl")
            numbers[":sl"] = max_shards - shards
        try:
            return self._add(account, " AND ".join(conditions), numbers)
        except _Refused:
            usage = self.get(account)
            if usage is None:
                raise UsageNotCounted(account) from None
            raise OverAccountLimit(usage) from None

    def release(self, account: str, queues: int, shards: int) -> None:
        """Count ``queues`` fewer queues and ``shards`` fewer shards (deleted ones); never below zero."""
        try:
            self._add(account, "#q >= :rq AND #s >= :rs",
                      {":q": -queues, ":s": -shards, ":rq": queues, ":rs": shards})
        except _Refused:
            log.warning("account %s: released %d queue(s), %d shard(s) more than it counted", account, queues, shards)

    def _add(self, account: str, condition: str, numbers: dict[str, int]) -> AccountUsage:
        """``ADD`` ``:q`` queues and ``:s`` shards if ``condition`` holds; _Refused when it does not."""
        names = {"#q": "queues", "#s": "shards"}
        if "#n" in condition:
            names["#n"] = "name"
        with _translated():
            try:
                resp = self._client.update_item(
                    TableName=self.table_name,
                    Key=_key(account),
                    UpdateExpression="ADD #q :q, #s :s",
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues={k: {"N": str(v)} for k, v in numbers.items()},
                    ReturnValues="ALL_NEW",
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                    raise _Refused() from None
                raise
        return _decode(resp["Attributes"])


class _Refused(Exception):
    pass


def _key(account: str) -> dict[str, Any]:
    return {"account": {"S": USAGE_ACCOUNT}, "name": {"S": account}}


def _decode(item: dict[str, Any]) -> AccountUsage:
    return AccountUsage(account=item["name"]["S"], queues=int(item["queues"]["N"]), shards=int(item["shards"]["N"]))


def _translated() -> AbstractContextManager[None]:
    return outages_or_internal("account usage call", log)
