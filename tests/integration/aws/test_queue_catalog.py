"""The queue catalog's rules against DynamoDB's API (moto's server, or the configured endpoint)."""

import asyncio
import itertools
import json
from collections.abc import Callable

import pytest

from ferrymq.aws import session
from ferrymq.aws.credentials import CredentialStore
from ferrymq.aws.queue_store import QueueRecord, QueueStore
from ferrymq.clock import ManualClock
from ferrymq.errors import (
    InvalidAttributeName,
    InvalidAttributeValue,
    InvalidParameterValue,
    PurgeQueueInProgress,
    QueueDeletedRecently,
    QueueDoesNotExist,
    QueueNameExists,
)
from ferrymq.metadata.catalog import QueueCatalog
from ferrymq.settings import Settings

_accounts = itertools.count(100000000000)


@pytest.fixture
def catalog(aws_settings: Settings) -> tuple[QueueCatalog, ManualClock, str]:
    clock = ManualClock()
    store = QueueStore(session.client("dynamodb", aws_settings), aws_settings.queues_table)
    return QueueCatalog(store, clock, partitions=4, ttl=30, region="us-east-1"), clock, str(next(_accounts))


def test_create_is_idempotent_for_the_same_attributes(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, _, account = catalog
    # given a queue created with a visibility timeout
    first = asyncio.run(cat.create(account, "orders", {"VisibilityTimeout": "60"}, {}))
    # when it is created again with the same (or default-equal) attributes, then the same queue comes back
    again = asyncio.run(cat.create(account, "orders", {"VisibilityTimeout": "60", "DelaySeconds": "0"}, {}))
    assert again.queue_id == first.queue_id
    assert 0 <= first.partition < 4
    # when it is created with a different value, then QueueNameExists
    with pytest.raises(QueueNameExists):
        asyncio.run(cat.create(account, "orders", {"VisibilityTimeout": "61"}, {}))


def test_delete_then_create_within_60_seconds(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, clock, account = catalog
    original = asyncio.run(cat.create(account, "q", {}, {}))
    asyncio.run(cat.delete(account, "q"))
    with pytest.raises(QueueDoesNotExist):
        asyncio.run(cat.get(account, "q"))
    with pytest.raises(QueueDeletedRecently):
        asyncio.run(cat.create(account, "q", {}, {}))
    clock.advance(61)
    recreated = asyncio.run(cat.create(account, "q", {}, {}))
    assert recreated.queue_id != original.queue_id
    assert asyncio.run(cat.get(account, "q")).queue_id == recreated.queue_id


def test_list_by_prefix_with_paging(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, _, account = catalog
    for name in ["a1", "a2", "a3", "b1"]:
        asyncio.run(cat.create(account, name, {}, {}))
    asyncio.run(cat.delete(account, "a2"))
    assert [q.name for q in asyncio.run(cat.list(account, "a", None, None))] == ["a1", "a3"]
    assert [q.name for q in asyncio.run(cat.list(account, "", 2, None))] == ["a1", "a3"]
    assert [q.name for q in asyncio.run(cat.list(account, "", 2, "a3"))] == ["b1"]


def test_purge_cooldown(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, clock, account = catalog
    asyncio.run(cat.create(account, "p", {}, {}))
    asyncio.run(cat.mark_purged(account, "p"))
    with pytest.raises(PurgeQueueInProgress, match="Only one PurgeQueue operation on p"):
        asyncio.run(cat.mark_purged(account, "p"))
    clock.advance(60)
    asyncio.run(cat.mark_purged(account, "p"))


def test_set_attributes_merges_and_reads_back(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, clock, account = catalog
    asyncio.run(cat.create(account, "s", {"DelaySeconds": "5"}, {}))
    clock.advance(10)
    updated = asyncio.run(cat.set_attributes(account, "s", {"VisibilityTimeout": "120"}))
    assert updated.attributes == {"DelaySeconds": "5", "VisibilityTimeout": "120"}
    assert updated.modified_at > updated.created_at
    assert asyncio.run(cat.get(account, "s")).attributes == updated.attributes


def test_credential_store_round_trip(aws_settings: Settings) -> None:
    store = CredentialStore.from_settings(aws_settings)
    created = store.create("123456789012", "alice")
    assert created.access_key_id.startswith("AKIA") and len(created.secret_access_key) == 40
    assert store.get(created.access_key_id) == created
    assert created.principal_id.startswith("AIDA")
    assert created in store.list()
    assert store.delete(created.access_key_id) is True
    assert store.get(created.access_key_id) is None
    assert store.delete(created.access_key_id) is False


# --- FIFO queues ---------------------------------------------------------------------------------------


def test_fifo_queues_need_both_the_suffix_and_the_attribute(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, _, account = catalog
    # given a FIFO name and FifoQueue=true, then a FIFO queue is created that stores its type
    created = asyncio.run(cat.create(account, "jobs.fifo", {"FifoQueue": "true"}, {}))
    assert created.attributes["FifoQueue"] == "true"
    assert asyncio.run(cat.create(account, "jobs.fifo", {"FifoQueue": "true"}, {})).queue_id == created.queue_id
    # when either half is missing, then SQS's name errors
    with pytest.raises(InvalidParameterValue, match="Can only include alphanumeric characters"):
        asyncio.run(cat.create(account, "plain.fifo", {}, {}))
    with pytest.raises(InvalidParameterValue, match="The name of a FIFO queue can only include"):
        asyncio.run(cat.create(account, "plain", {"FifoQueue": "true"}, {}))
    with pytest.raises(InvalidParameterValue, match="The name of a FIFO queue can only include"):
        asyncio.run(cat.create(account, "x" * 76 + ".fifo", {"FifoQueue": "true"}, {}))
    # and the type cannot change afterwards
    with pytest.raises(InvalidAttributeValue, match="Modifying queue type is not supported"):
        asyncio.run(cat.set_attributes(account, "jobs.fifo", {"FifoQueue": "false"}))
    asyncio.run(cat.create(account, "std", {}, {}))
    with pytest.raises(InvalidAttributeName, match="Unknown Attribute FifoQueue"):
        asyncio.run(cat.set_attributes(account, "std", {"FifoQueue": "true"}))


# --- dead-letter queues --------------------------------------------------------------------------------


def _redrive(cat: QueueCatalog, account: str, dlq: str, count: int | str = 3) -> dict[str, str]:
    return {"RedrivePolicy": json.dumps({"deadLetterTargetArn": cat.arn(account, dlq), "maxReceiveCount": count})}


def test_a_redrive_policy_must_name_a_live_queue_of_the_same_owner_and_type(
    catalog: tuple[QueueCatalog, ManualClock, str],
) -> None:
    cat, _, account = catalog
    asyncio.run(cat.create(account, "dlq", {}, {}))
    asyncio.run(cat.create(account, "dlq.fifo", {"FifoQueue": "true"}, {}))
    with pytest.raises(InvalidParameterValue, match="Reason: Dead letter target does not exist"):
        asyncio.run(cat.create(account, "src", _redrive(cat, account, "nowhere"), {}))
    with pytest.raises(InvalidParameterValue, match="Reason: Dead-letter target owner should be same as the source"):
        asyncio.run(cat.create(account, "src", _redrive(cat, "999999999999", "dlq"), {}))
    with pytest.raises(InvalidAttributeName, match="Dead-letter queue must be same type of queue as the source"):
        asyncio.run(cat.create(account, "src", _redrive(cat, account, "dlq.fifo"), {}))
    # when the target is right, then the policy is stored as SQS renders it
    source = asyncio.run(cat.create(account, "src", _redrive(cat, account, "dlq", "7"), {}))
    assert json.loads(source.attributes["RedrivePolicy"]) == {
        "deadLetterTargetArn": cat.arn(account, "dlq"), "maxReceiveCount": 7}
    # and an empty policy removes it
    cleared = asyncio.run(cat.set_attributes(account, "src", {"RedrivePolicy": ""}))
    assert "RedrivePolicy" not in cleared.attributes


def test_a_dead_letter_queue_chooses_its_sources(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, _, account = catalog
    asyncio.run(cat.create(account, "dlq", {"RedriveAllowPolicy": '{"redrivePermission": "denyAll"}'}, {}))
    with pytest.raises(InvalidParameterValue, match="RedriveAllowPolicy of the dead-letter target does not allow"):
        asyncio.run(cat.create(account, "a", _redrive(cat, account, "dlq"), {}))
    allow_b = {"redrivePermission": "byQueue", "sourceQueueArns": [cat.arn(account, "b")]}
    asyncio.run(cat.set_attributes(account, "dlq", {"RedriveAllowPolicy": json.dumps(allow_b)}))
    asyncio.run(cat.create(account, "b", _redrive(cat, account, "dlq"), {}))
    with pytest.raises(InvalidParameterValue, match="does not allow"):
        asyncio.run(cat.create(account, "a", _redrive(cat, account, "dlq"), {}))


def test_dead_letter_sources_are_listed_in_pages(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, _, account = catalog
    asyncio.run(cat.create(account, "dlq", {}, {}))
    asyncio.run(cat.create(account, "other-dlq", {}, {}))
    for name in ["s1", "s2", "s3"]:
        asyncio.run(cat.create(account, name, _redrive(cat, account, "dlq"), {}))
    asyncio.run(cat.create(account, "s4", _redrive(cat, account, "other-dlq"), {}))
    assert [q.name for q in asyncio.run(cat.dead_letter_sources(account, "dlq", 10, None))] == ["s1", "s2", "s3"]
    assert [q.name for q in asyncio.run(cat.dead_letter_sources(account, "dlq", 2, None))] == ["s1", "s2"]
    assert [q.name for q in asyncio.run(cat.dead_letter_sources(account, "dlq", 2, "s2"))] == ["s3"]


# --- tags and permissions --------------------------------------------------------------------------------


def test_tags_merge_untag_and_are_read_back_through_the_cache(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, _, account = catalog
    asyncio.run(cat.create(account, "t", {}, {"team": "core"}))
    assert asyncio.run(cat.get(account, "t")).tags == {"team": "core"}
    asyncio.run(cat.tag(account, "t", {"team": "edge", "env": "dev"}))
    assert asyncio.run(cat.get(account, "t")).tags == {"team": "edge", "env": "dev"}
    asyncio.run(cat.untag(account, "t", ["team", "absent"]))
    assert asyncio.run(cat.get(account, "t")).tags == {"env": "dev"}
    with pytest.raises(InvalidParameterValue, match="Too many tags added for queue t"):
        asyncio.run(cat.tag(account, "t", {f"k{i}": "v" for i in range(50)}))
    assert asyncio.run(cat.get(account, "t")).tags == {"env": "dev"}


def test_permissions_edit_the_policy(catalog: tuple[QueueCatalog, ManualClock, str]) -> None:
    cat, _, account = catalog
    asyncio.run(cat.create(account, "p", {}, {}))
    added = asyncio.run(cat.add_permission(account, "p", label="l1", accounts=["222222222222"], actions=["*"]))
    assert json.loads(added.attributes["Policy"])["Statement"][0]["Sid"] == "l1"
    assert asyncio.run(cat.get(account, "p")).attributes["Policy"] == added.attributes["Policy"]
    removed = asyncio.run(cat.remove_permission(account, "p", "l1"))
    assert "Policy" not in removed.attributes


class _RacingStore(QueueStore):
    """A store that lets another writer change the record between this writer's read and its write, once."""

    def __init__(self, inner: QueueStore, interleave: Callable[[], None]) -> None:
        self._inner = inner
        self._interleave: Callable[[], None] | None = interleave

    def get(self, account: str, name: str, region: str | None = None) -> QueueRecord | None:
        return self._inner.get(account, name, region)

    def replace(self, old: QueueRecord, new: QueueRecord) -> None:
        if self._interleave is not None:
            interleave, self._interleave = self._interleave, None
            interleave()
        self._inner.replace(old, new)


def test_concurrent_permission_changes_are_not_lost(aws_settings: Settings) -> None:
    # given two front ends over one catalog table
    store = QueueStore(session.client("dynamodb", aws_settings), aws_settings.queues_table)
    account = str(next(_accounts))
    other = QueueCatalog(store, ManualClock(), partitions=4, ttl=30, region="us-east-1")
    asyncio.run(other.create(account, "shared", {}, {}))

    def other_front_end_writes() -> None:
        asyncio.run(other.add_permission(account, "shared", label="theirs", accounts=["222222222222"], actions=["*"]))

    racing = QueueCatalog(_RacingStore(store, other_front_end_writes), ManualClock(), partitions=4, ttl=30,
                          region="us-east-1")
    # when this one's write races the other's
    asyncio.run(racing.add_permission(account, "shared", label="ours", accounts=["333333333333"], actions=["*"]))
    # then the conditional write made it retry on the fresh record, keeping both statements
    stored = store.get(account, "shared")
    assert stored is not None
    assert [s["Sid"] for s in json.loads(stored.attributes["Policy"])["Statement"]] == ["theirs", "ours"]
