"""The replica-set settings: the workers table beside the others, lease and heartbeat timings."""

from ferrymq.settings import Settings
from ferrymq.storage.server.process import controller_times


def test_the_workers_table_follows_the_table_prefix() -> None:
    assert Settings.from_env({"FERRYMQ_TABLE_PREFIX": "p-"}).workers_table == "p-workers"


def test_lease_and_heartbeat_timings_have_defaults_and_read_their_variables() -> None:
    # given no setting, then a 5 s lease, a heartbeat every 3 s and 10 s of grace
    defaults = Settings.from_env({})
    assert (defaults.leader_lease_seconds, defaults.worker_heartbeat_seconds, defaults.worker_grace_seconds) == (
        5.0,
        3.0,
        10.0,
    )
    # when the environment names them, then they are used
    env = {
        "FERRYMQ_LEADER_LEASE_SECONDS": "2.5",
        "FERRYMQ_WORKER_HEARTBEAT_SECONDS": "0.5",
        "FERRYMQ_WORKER_GRACE_SECONDS": "4",
    }
    settings = Settings.from_env(env)
    assert (settings.leader_lease_seconds, settings.worker_heartbeat_seconds, settings.worker_grace_seconds) == (
        2.5,
        0.5,
        4.0,
    )


def test_the_controller_heartbeats_three_times_per_grace_and_manages_every_half_grace_at_most() -> None:
    # given the defaults: a heartbeat every 3 s, dead replicas looked for every 5 s (a tenth of an idle cluster's
    # DynamoDB calls went to each)
    times = controller_times(Settings.from_env({}))
    assert (times.heartbeat_seconds, times.manager_seconds, times.grace_ms) == (3.0, 5.0, 10_000)
    # when the grace is short, then both follow it, so that a live worker is never taken for dead
    times = controller_times(Settings.from_env({"FERRYMQ_WORKER_GRACE_SECONDS": "3"}))
    assert (times.heartbeat_seconds, times.manager_seconds) == (1.0, 1.5)
    # and a long one neither slows the manager past its cadence nor the heartbeat past its setting
    times = controller_times(Settings.from_env({"FERRYMQ_WORKER_GRACE_SECONDS": "60"}))
    assert (times.heartbeat_seconds, times.manager_seconds) == (3.0, 5.0)
    # and an absurdly short one keeps the manager's cadence at half a second
    times = controller_times(Settings.from_env({"FERRYMQ_WORKER_GRACE_SECONDS": "0.3"}))
    assert times.manager_seconds == 0.5
