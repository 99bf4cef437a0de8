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
