"""WorkerRegistry against a real DynamoDB API (the durable stand-in, or FERRYMQ_TEST_AWS_ENDPOINT), with the
workers table bootstrapped from template.yaml. Time is a ManualClock: nobody waits for a worker to die."""

from __future__ import annotations

import uuid

import pytest

from ferrymq.aws import session
from ferrymq.aws.workers import WorkerInfo, WorkerRegistry, WorkerState
from ferrymq.clock import ManualClock
from ferrymq.errors import ServiceUnavailable
from ferrymq.settings import Settings
from tests.support.aws_clients import unreachable_dynamodb

GRACE_MS = 10_000


def ms(clock: ManualClock) -> int:
    return int(clock.now() * 1000)


@pytest.fixture
def cluster() -> str:
    return f"cluster-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def registry(aws_settings: Settings) -> WorkerRegistry:
    return WorkerRegistry.from_settings(aws_settings)


def test_the_workers_table_is_bootstrapped_from_the_template(aws_settings: Settings) -> None:
    table = session.client("dynamodb", aws_settings).describe_table(TableName=aws_settings.workers_table)["Table"]
    assert {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]} == {
        "cluster": "HASH",
        "worker_id": "RANGE",
    }


def test_a_heartbeat_records_the_worker_and_later_ones_keep_its_start(registry: WorkerRegistry, cluster: str) -> None:
    clock = ManualClock()
    started = ms(clock)
    assert registry.get(cluster, "w1") is None
    # given a first heartbeat while joining
    first = registry.heartbeat("w1", cluster, "10.0.0.1", 7500, started, WorkerState.JOINING)
    assert first == WorkerInfo("w1", cluster, "10.0.0.1", 7500, started, started, WorkerState.JOINING)
    # when it beats again, serving, a second later
    clock.advance(1)
    again = registry.heartbeat("w1", cluster, "10.0.0.1", 7500, ms(clock), WorkerState.SERVING)
    # then the heartbeat and state move on, and the start stays
    assert (again.heartbeat_at, again.started_at, again.state) == (ms(clock), started, WorkerState.SERVING)
    assert registry.get(cluster, "w1") == again


def test_a_restarted_worker_names_its_own_start(registry: WorkerRegistry, cluster: str) -> None:
    clock = ManualClock()
    registry.heartbeat("w1", cluster, "10.0.0.1", 7500, ms(clock), WorkerState.SERVING)
    clock.advance(30)
    restarted = registry.heartbeat(
        "w1", cluster, "10.0.0.2", 7501, ms(clock), WorkerState.JOINING, started_at_ms=ms(clock) - 200
    )
    assert (restarted.host, restarted.port, restarted.started_at) == ("10.0.0.2", 7501, ms(clock) - 200)


def test_members_splits_the_cluster_into_alive_and_dead_by_heartbeat_age(
    registry: WorkerRegistry, cluster: str
) -> None:
    clock = ManualClock()
    # given three workers beating at once, then only w1 and w3 beating 5 s later
    for worker in ("w3", "w1", "w2"):
        registry.heartbeat(worker, cluster, "10.0.0.1", 7500, ms(clock), WorkerState.SERVING)
    clock.advance(5)
    for worker in ("w1", "w3"):
        registry.heartbeat(worker, cluster, "10.0.0.1", 7500, ms(clock), WorkerState.SERVING)
    # and a worker of another cluster that went silent
    registry.heartbeat("w9", f"{cluster}-other", "10.0.0.9", 7500, ms(clock) - 60_000, WorkerState.SERVING)
    # when 5 s more pass, w2 is silent for exactly the grace period: still alive
    clock.advance(5)
    alive, dead = registry.members(cluster, ms(clock), GRACE_MS)
    assert [w.worker_id for w in alive] == ["w1", "w2", "w3"] and dead == []
    # and one millisecond later it is dead, while the others are not
    alive, dead = registry.members(cluster, ms(clock) + 1, GRACE_MS)
    assert [w.worker_id for w in alive] == ["w1", "w3"]
    assert [w.worker_id for w in dead] == ["w2"]


def test_a_worker_that_leaves_is_neither_alive_nor_dead(registry: WorkerRegistry, cluster: str) -> None:
    clock = ManualClock()
    registry.heartbeat("w1", cluster, "10.0.0.1", 7500, ms(clock), WorkerState.LEAVING)
    registry.heartbeat("w2", cluster, "10.0.0.1", 7500, ms(clock), WorkerState.SERVING)
    registry.leave(cluster, "w1")
    registry.leave(cluster, "w1")  # leaving twice is harmless
    assert registry.get(cluster, "w1") is None
    assert registry.members(cluster, ms(clock) + 60_000, GRACE_MS) == ([], [registry.get(cluster, "w2")])


def test_a_worker_marked_leaving_stays_leaving_while_it_beats_until_it_is_taken_back(
    registry: WorkerRegistry, cluster: str
) -> None:
    clock = ManualClock()
    registry.heartbeat("w1", cluster, "10.0.0.1", 7500, ms(clock), WorkerState.SERVING)
    # given an operator marks it leaving
    marked = registry.set_state(cluster, "w1", WorkerState.LEAVING)
    assert marked is not None and marked.state is WorkerState.LEAVING
    # when it beats on as serving
    clock.advance(1)
    beat = registry.heartbeat("w1", cluster, "10.0.0.2", 7501, ms(clock), WorkerState.SERVING)
    # then the beat counts, the state stays leaving, and the worker learns it from the answer
    assert (beat.host, beat.port, beat.heartbeat_at, beat.state) == ("10.0.0.2", 7501, ms(clock), WorkerState.LEAVING)
    assert registry.get(cluster, "w1") == beat
    # and once taken back, its beats name its state again
    registry.set_state(cluster, "w1", WorkerState.SERVING)
    registry.heartbeat("w1", cluster, "10.0.0.2", 7501, ms(clock), WorkerState.JOINING)
    assert registry.get(cluster, "w1").state is WorkerState.JOINING  # type: ignore[union-attr]


def test_setting_the_state_of_a_worker_never_heard_of_creates_nothing(registry: WorkerRegistry, cluster: str) -> None:
    assert registry.set_state(cluster, "w9", WorkerState.LEAVING) is None
    assert registry.get(cluster, "w9") is None


def test_the_clusters_own_items_are_no_members_and_no_worker_may_take_their_ids(
    aws_settings: Settings, registry: WorkerRegistry, cluster: str
) -> None:
    # given an item of the cluster itself beside its worker
    session.client("dynamodb", aws_settings).put_item(
        TableName=aws_settings.workers_table,
        Item={"cluster": {"S": cluster}, "worker_id": {"S": "#manager"}, "holder": {"S": "w1"}},
    )
    registry.heartbeat("w1", cluster, "10.0.0.1", 7500, 0, WorkerState.SERVING)
    # then members lists the worker only
    assert [w.worker_id for w in registry.members(cluster, 0, GRACE_MS)[0]] == ["w1"]
    with pytest.raises(ValueError):
        registry.heartbeat("#manager", cluster, "10.0.0.1", 7500, 0, WorkerState.SERVING)
    with pytest.raises(ValueError):
        registry.heartbeat("w2", cluster, "10.0.0.1", 0, 0, WorkerState.SERVING)


def test_an_unreachable_dynamodb_or_a_missing_table_is_service_unavailable(aws_settings: Settings) -> None:
    client = unreachable_dynamodb()
    unreachable = WorkerRegistry(client, aws_settings.workers_table)
    with pytest.raises(ServiceUnavailable):
        unreachable.heartbeat("w1", "c", "10.0.0.1", 7500, 0, WorkerState.SERVING)
    with pytest.raises(ServiceUnavailable):
        unreachable.members("c", 0, GRACE_MS)
    missing = WorkerRegistry.from_settings(aws_settings.with_(table_prefix="no-such-prefix-"))
    with pytest.raises(ServiceUnavailable):
        missing.get("c", "w1")
