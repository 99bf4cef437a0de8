"""FerryMQ's own GetAccountLimits: an account's limits on queues and shards and how much of them it uses
(:mod:`ferrymq.metadata.account_quota`). Admin keys only (:func:`.admin.admin_only`)."""

from __future__ import annotations

from typing import Any

from ferrymq.errors import ServiceUnavailable
from ferrymq.frontend.actions.admin import account_param, admin_only
from ferrymq.frontend.context import RequestContext


async def get_account_limits(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    admin_only(ctx)
    account = account_param(params, required=True)
    assert account is not None
    quota = ctx.services.catalog.quota
    if quota is None:
        raise ServiceUnavailable(f"{ctx.action} is not served by this front end.")
    usage = await quota.usage(account)
    return {"AccountId": account, "MaxQueues": quota.max_queues, "MaxShards": quota.max_shards,
            "Queues": usage.queues, "Shards": usage.shards}
