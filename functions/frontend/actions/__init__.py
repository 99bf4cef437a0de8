"""The action table: action name -> handler, SQS's actions and FerryMQ's own (which no SQS name shadows)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ferrymq.frontend.actions import (
    access_keys,
    account_limits,
    admin,
    event_source_mappings,
    messages,
    move_tasks,
    permissions,
    queue_inspection,
    queues,
    tags,
)
from ferrymq.frontend.context import RequestContext

Handler = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any]]]

ACTIONS: dict[str, Handler] = {
    "CreateQueue": queues.create_queue,
    "GetQueueUrl": queues.get_queue_url,
    "ListQueues": queues.list_queues,
    "DeleteQueue": queues.delete_queue,
    "GetQueueAttributes": queues.get_queue_attributes,
    "SetQueueAttributes": queues.set_queue_attributes,
    "PurgeQueue": queues.purge_queue,
    "ListDeadLetterSourceQueues": queues.list_dead_letter_source_queues,
    "TagQueue": tags.tag_queue,
    "UntagQueue": tags.untag_queue,
    "ListQueueTags": tags.list_queue_tags,
    "AddPermission": permissions.add_permission,
    "RemovePermission": permissions.remove_permission,
    "SendMessage": messages.send_message,
    "SendMessageBatch": messages.send_message_batch,
    "ReceiveMessage": messages.receive_message,
    "DeleteMessage": messages.delete_message,
    "DeleteMessageBatch": messages.delete_message_batch,
    "ChangeMessageVisibility": messages.change_message_visibility,
    "ChangeMessageVisibilityBatch": messages.change_message_visibility_batch,
    "StartMessageMoveTask": move_tasks.start_message_move_task,
    "ListMessageMoveTasks": move_tasks.list_message_move_tasks,
    "CancelMessageMoveTask": move_tasks.cancel_message_move_task,
    # FerryMQ's own API (ferrymq.protocol.ferrymq_model), reached only with the X-Amz-Target prefix FerryMQ.
    "GetQueueStatistics": queue_inspection.get_queue_statistics,
    "PeekMessages": queue_inspection.peek_messages,
    "GetClusterStatus": admin.get_cluster_status,
    "GetUsageSummary": admin.get_usage_summary,
    "GetAccountLimits": account_limits.get_account_limits,
    "ListAccounts": access_keys.list_accounts,
    "CreateAccessKey": access_keys.create_access_key,
    "ListAccessKeys": access_keys.list_access_keys,
    "DisableAccessKey": access_keys.disable_access_key,
    "EnableAccessKey": access_keys.enable_access_key,
    "RotateAccessKey": access_keys.rotate_access_key,
    "DeleteAccessKey": access_keys.delete_access_key,
    **event_source_mappings.ACTIONS,
}
