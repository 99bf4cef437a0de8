"""The dashboard's mappings view: each event-source mapping's configuration, state, lease holder and last result.

Read straight from the mappings table with a projection that names only what the table shows, so the sealed
signing secret never leaves DynamoDB, and a destination is shown as its scheme and host only (a URL's path or
query may carry a token of the receiver's). An account's mappings are one Query; all of them (an admin key
without an account) one Scan, as the push hosts read them (mappings are few).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from ferrymq.aws.errors import translate_client_errors
from ferrymq.bulkhead import off_loop
from ferrymq.frontend.context import Services
from ferrymq.metadata.event_source_mappings import MAPPING_PREFIX, table_name
from ferrymq.metadata.mapping_leases import HOSTS_ACCOUNT

MAX_MAPPINGS = 500
"""Mappings one poll shows: the first, by account and UUID."""
_SHOWN = ("account", "id", "uuid", "queue_arn", "function_arn", "url", "batch_size", "window_seconds",
          "max_concurrency", "report_failures", "enabled", "last_result", "last_modified", "lease_owner",
          "lease_until_ms")
_PROJECTION = ", ".join(f"#{i}" for i in range(len(_SHOWN)))
_NAMES = {f"#{i}": name for i, name in enumerate(_SHOWN)}


def url_origin(url: str) -> str:
    """``url``'s scheme and host (and port), without credentials, path or query."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(unreadable URL)"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}"


def _row(item: dict[str, Any], now_ms: int) -> dict[str, Any]:
    def number(name: str) -> int | None:
        return int(item[name]["N"]) if name in item else None

    until_ms = number("lease_until_ms") or 0
    owner = item.get("lease_owner", {}).get("S")
    return {
        "uuid": item["uuid"]["S"],
        "account": item["account"]["S"],
        "queueArn": item["queue_arn"]["S"],
        "queue": item["queue_arn"]["S"].rsplit(":", 1)[-1],
        "target": item["function_arn"]["S"] if "function_arn" in item else url_origin(item.get("url", {}).get("S", "")),
        "targetKind": "function" if "function_arn" in item else "url",
        "state": "Enabled" if item["enabled"]["BOOL"] else "Disabled",
        "batchSize": number("batch_size"),
        "windowSeconds": number("window_seconds"),
        "maxConcurrency": number("max_concurrency"),
        "reportFailures": item.get("report_failures", {}).get("BOOL", False),
        "lastResult": item.get("last_result", {}).get("S"),
        "lastModified": float(item["last_modified"]["N"]) if "last_modified" in item else None,
        # A lease past its time is nobody's: the next push host to look claims it.
        "leaseHolder": owner if owner and until_ms >= now_ms else None,
        "leaseUntilMs": until_ms or None,
    }


def _read(client: Any, table: str, account: str | None) -> tuple[list[dict[str, Any]], bool]:
    items: list[dict[str, Any]] = []
    common: dict[str, Any] = {"TableName": table, "ProjectionExpression": _PROJECTION,
                              "ExpressionAttributeNames": dict(_NAMES)}
    if account is None:
        pages = client.get_paginator("scan").paginate(**common)
    else:
        common["ExpressionAttributeNames"]["#a"] = "account"
        common["ExpressionAttributeNames"]["#k"] = "id"
        pages = client.get_paginator("query").paginate(
            **common, KeyConditionExpression="#a = :a AND begins_with(#k, :m)",
            ExpressionAttributeValues={":a": {"S": account}, ":m": {"S": MAPPING_PREFIX}})
    with translate_client_errors():
        for page in pages:
            for item in page.get("Items", []):
                if item["account"]["S"] != HOSTS_ACCOUNT and item["id"]["S"].startswith(MAPPING_PREFIX):
                    items.append(item)
            if len(items) > MAX_MAPPINGS:
                break
    items.sort(key=lambda i: (i["account"]["S"], i["id"]["S"]))
    return items[:MAX_MAPPINGS], len(items) > MAX_MAPPINGS


async def listed(services: Services, account: str | None) -> dict[str, Any]:
    """The mappings of ``account`` (None: of every account) as the page shows them."""
    store = services.mappings
    if store is None:
        return {"account": account, "mappings": [], "truncated": False,
                "unavailable": "This front end does not serve event-source mappings."}
    items, truncated = await off_loop(services.metadata, _read, store.client, table_name(services.settings), account)
    now_ms = int(time.time() * 1000)
    return {"account": account, "mappings": [_row(item, now_ms) for item in items], "truncated": truncated}
