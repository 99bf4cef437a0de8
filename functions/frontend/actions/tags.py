"""Queue tag actions: TagQueue, UntagQueue, ListQueueTags (owner only: cross-account permissions don't apply)."""

from __future__ import annotations

from typing import Any

from ferrymq.errors import InvalidParameterValue
from ferrymq.frontend.context import RequestContext
from ferrymq.frontend.message_checks import require


def _tag_map(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise InvalidParameterValue("The Tags map is malformed.")
    return value


async def tag_queue(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    await ctx.services.catalog.tag(queue.account, queue.name, _tag_map(require(params, "Tags")), queue.region)
    return {}


async def untag_queue(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    keys = require(params, "TagKeys")
    await ctx.services.catalog.untag(queue.account, queue.name, [str(k) for k in keys], queue.region)
    return {}


async def list_queue_tags(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    # A queue without tags answers without a Tags member at all, as SQS does.
    return {"Tags": dict(queue.tags)} if queue.tags else {}
