"""The ARNs the queue catalog gives its queues are the ones workers read back."""

from __future__ import annotations

from ferrymq.arn import QueueArn, parse_queue_arn
from ferrymq.clock import ManualClock
from ferrymq.metadata.catalog import QueueCatalog, is_fifo


class _NoStore:
    """Naming a queue reads nothing."""


def test_the_catalog_names_its_queues_in_its_region_as_workers_read_them() -> None:
    catalog = QueueCatalog(_NoStore(), ManualClock(), partitions=4, ttl=1.0, region="eu-central-1")  # type: ignore[arg-type]
    arn = catalog.arn("123456789012", "jobs.fifo")
    assert arn == "arn:aws:sqs:eu-central-1:123456789012:jobs.fifo"
    assert parse_queue_arn(arn) == QueueArn("eu-central-1", "123456789012", "jobs.fifo")
    assert is_fifo("jobs.fifo") and not is_fifo("jobs")
