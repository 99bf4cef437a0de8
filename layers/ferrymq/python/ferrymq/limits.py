"""SQS's limits and time windows, defined once for the front end and the storage workers.

Two windows are coupled across two clocks.  The front end claims a FIFO deduplication id in DynamoDB for
``DEDUP_WINDOW_SECONDS`` by its own clock; a retry inside that window gets the first message id back and
sends it to the worker again, which must still recognise that id as stored.  The worker remembers ids by
its own clock, so its window is the deduplication window plus the largest clock difference we tolerate
between a front end and a worker: a resend the front end still treats as a duplicate always finds the id.
"""

from __future__ import annotations

MAX_VISIBILITY_TIMEOUT_SECONDS = 43_200
"""12 hours: the largest VisibilityTimeout and ChangeMessageVisibility value."""

MAX_DELAY_SECONDS = 900
"""15 minutes: the largest DelaySeconds, per queue or per message."""

MAX_WAIT_TIME_SECONDS = 20
"""The longest long poll."""

DEFAULT_RETENTION_SECONDS = 345_600
"""4 days: MessageRetentionPeriod when a queue does not set one."""

MIN_RETENTION_SECONDS = 60
MAX_RETENTION_SECONDS = 1_209_600
"""14 days."""

MAX_MESSAGE_BYTES = 1_048_576
"""1 MiB: the largest message (body and attributes), and the largest MaximumMessageSize."""

MAX_BATCH_BYTES = 1_048_576
"""What the bodies and attributes of one SendMessageBatch may add up to."""

MAX_BATCH_ENTRIES = 10

MAX_MESSAGE_ATTRIBUTES = 10

MAX_MESSAGES_PER_RECEIVE = 10

MAX_MOVE_TASK_MESSAGES_PER_SECOND = 500
"""The largest MaxNumberOfMessagesPerSecond of a message move task."""

MAX_LISTED_MOVE_TASKS = 10
"""ListMessageMoveTasks shows at most the last ten tasks of a queue."""

DEDUP_WINDOW_SECONDS = 300
"""5 minutes: how long a FIFO deduplication id (or content hash) makes a resend a duplicate."""

MAX_CLOCK_DIFFERENCE_SECONDS = 60
"""How far a front end's clock and a storage worker's clock may disagree without a FIFO retry being stored
twice."""

RESEND_WINDOW_MS = (DEDUP_WINDOW_SECONDS + MAX_CLOCK_DIFFERENCE_SECONDS) * 1000
"""How long a storage worker treats a stored message id as already stored (see the module docstring)."""

MAX_SHARDS = 64
"""The most partitions one queue may be spread over (``FerryMQShardCount``)."""

MAX_PEEK_MESSAGES = 100
"""The most messages one PeekMessages (FerryMQ's own action, which SQS lacks) shows."""

RESEND_HORIZON_MS = 30_000
"""How long after a send's first attempt a front end may resend it when its outcome is unknown (a leader
stepped down or timed out before answering).  A storage worker remembers the ids of plain messages removed
(deleted, dead-lettered, moved) within this long of being sent, so that such a resend does not store again a
message the first attempt stored and a consumer has since deleted."""

RECEIVE_ATTEMPT_WINDOW_MS = 5 * 60 * 1000
"""How long a FIFO ReceiveRequestAttemptId can be replayed."""

DROPPED_QUEUE_MEMORY_SECONDS = 600
"""How long a storage worker refuses sends to a queue id it dropped.  A front end that still has the deleted
queue in its metadata cache (30 s by default) keeps sending to its id for that long; without this the
messages would live on under an id nothing can reach.  Keep FERRYMQ_METADATA_CACHE_SECONDS well below it."""
