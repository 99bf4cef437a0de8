"""FerryMQ's own admin actions about the deployment: GetClusterStatus and GetUsageSummary.

They, and the access-key actions (:mod:`.access_keys`), need an admin key (``Credential.admin``); any other key
is refused AccessDenied (403) before anything is read.
"""

from __future__ import annotations

import asyncio
import datetime
import re
from typing import Any

from ferrymq import cluster_status
from ferrymq.accounts import ACCOUNT_ID_RULE, is_account_id
from ferrymq.bulkhead import off_loop
from ferrymq.errors import AccessDenied, InvalidParameterValue, ServiceUnavailable
from ferrymq.frontend.admin_services import AdminServices
from ferrymq.frontend.context import RequestContext
from ferrymq.frontend.message_checks import require
from ferrymq.usage import summary

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def admin_only(ctx: RequestContext) -> AdminServices:
    """The admin services, if the caller's key is an admin key; AccessDenied otherwise."""
    if not ctx.credential.admin:
        raise AccessDenied(f"Only an admin key may call {ctx.action}: {ctx.credential.access_key_id} is not one.")
    if ctx.services.admin is None:
        raise ServiceUnavailable(f"{ctx.action} is not served by this front end.")
    return ctx.services.admin


def account_param(params: dict[str, Any], name: str = "AccountId", *, required: bool = False) -> str | None:
    """An account id parameter, checked (MissingParameter when ``required`` and absent)."""
    value = require(params, name) if required else params.get(name)
    if value is not None and not is_account_id(value):
        raise InvalidParameterValue(f"Value {value} for parameter {name} is invalid. Reason: {ACCOUNT_ID_RULE}.")
    return value


async def get_cluster_status(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    admin = admin_only(ctx)
    settings = ctx.services.settings
    name = params.get("Cluster") or settings.cluster
    seen = await off_loop(ctx.services.metadata, admin.registries.read, name, settings.worker_grace_seconds,
                          int(ctx.services.clock.now() * 1000))
    report = cluster_status.assemble(seen, await cluster_status.ping_all(seen.addresses(), admin.peer_auth))
    return {
        "Cluster": report["cluster"],
        "Clusters": [
            {"Name": c["cluster"], "Partitions": c["partitions"], "Queues": c["queues"], "MaxQueues": c["max_queues"]}
            for c in report["clusters"]
        ],
        "Workers": [
            {"WorkerId": w["worker_id"], "Address": w["address"], "Alive": w["alive"], "State": w["state"],
             "HeartbeatAgeMillis": w["heartbeat_age_ms"], "Leads": w["leads"], "Answers": w["answers"],
             "AdminAddress": w.get("admin"), "WorstStallMillis": w.get("worst_stall_ms")}
            for w in report["workers"]
        ],
        "Partitions": [
            {"Partition": p["partition"], "Leader": p["leader"] or None, "Epoch": p["epoch"], "Replicas": p["replicas"],
             "InSyncReplicas": p["isr"], "Acks": p["acks"], "LeaseMillisLeft": p["lease_ms_left"],
             "Lag": [{"Replica": replica, "Records": records} for replica, records in p["lag"].items()],
             "Damage": [{"Replica": replica, "Note": note} for replica, note in p.get("damage", {}).items()]}
            for p in report["partitions"]
        ],
    }


async def get_usage_summary(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    admin = admin_only(ctx)
    account = account_param(params)
    day = params.get("Date")
    if day is None:
        day = datetime.datetime.fromtimestamp(ctx.services.clock.now(), datetime.UTC).date().isoformat()
    elif not _DATE.fullmatch(day) or not _is_date(day):
        raise InvalidParameterValue(f"Value {day} for parameter Date is invalid. Reason: a UTC day, YYYY-MM-DD.")
    # Reading a day's objects can outlast a metadata call's deadline: it gets a thread of its own.
    return await asyncio.to_thread(summary.summary, admin.s3, ctx.services.settings.usage_bucket, day, account)


def _is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True
