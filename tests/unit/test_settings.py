from pathlib import Path

from ferrymq.settings import Settings


def test_from_env_reads_ferrymq_variables() -> None:
    # given an environment naming a port, a data directory and a table prefix
    env = {"FERRYMQ_PORT": "9999", "FERRYMQ_DATA_DIR": "/tmp/x", "FERRYMQ_TABLE_PREFIX": "p-"}
    # when settings are built from it
    settings = Settings.from_env(env)
    # then those values are used and derived names follow
    assert settings.port == 9999
    assert settings.data_dir == Path("/tmp/x")
    assert settings.queues_table == "p-queues"
    assert settings.region == "us-east-1"


def test_from_env_defaults_match_local_conventions() -> None:
    settings = Settings.from_env({})
    assert (settings.account_id, settings.dev_access_key, settings.dev_secret_key) == ("000000000000", "test", "test")
    assert settings.port == 9324
    assert settings.aws_endpoint_url is None


def test_worker_request_timeout_defaults_to_five_seconds_and_reads_its_variable() -> None:
    # given no setting, then every worker call gets five seconds
    assert Settings.from_env({}).worker_request_timeout_seconds == 5.0
    # when the environment names a deadline, then it is used
    env = {"FERRYMQ_WORKER_REQUEST_TIMEOUT_SECONDS": "0.25"}
    assert Settings.from_env(env).worker_request_timeout_seconds == 0.25
