"""The action table: SQS action name -> handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from functions.frontend.actions import messages, move_tasks, permissions, queues, tags
from functions.frontend.context import RequestContext

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
}
