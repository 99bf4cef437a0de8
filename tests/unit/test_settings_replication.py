"""The replica-set settings: the workers table beside the others, lease and heartbeat timings."""

from ferrymq.settings import Settings


def test_the_workers_table_follows_the_table_prefix() -> None:
    assert Settings.from_env({"FERRYMQ_TABLE_PREFIX": "p-"}).workers_table == "p-workers"


def test_lease_and_heartbeat_timings_have_defaults_and_read_their_variables() -> None:
    # given no setting, then a 5 s lease, a heartbeat every 2 s and 10 s of grace
    defaults = Settings.from_env({})
    assert (defaults.leader_lease_seconds, defaults.worker_heartbeat_seconds, defaults.worker_grace_seconds) == (
        5.0,
        2.0,
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
