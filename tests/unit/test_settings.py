from pathlib import Path
from typing import Any

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


def test_metrics_settings_read_their_variables_and_cloudwatch_is_on_only_from_the_environment() -> None:
    # given no setting: the gateway's metrics are on, and so is publishing for a process built from the environment
    defaults = Settings.from_env({})
    assert (defaults.metrics_enabled, defaults.cloudwatch_enabled) == (True, True)
    assert (defaults.metrics_collect_seconds, defaults.metrics_max_queues) == (15.0, 1000)
    assert (defaults.worker_admin_host, defaults.worker_admin_port) == ("127.0.0.1", 0)
    # but not for one a test builds directly
    assert Settings().cloudwatch_enabled is False
    # when the environment names them, then they are used
    env = {"FERRYMQ_METRICS_ENABLED": "0", "FERRYMQ_METRICS_COLLECT_SECONDS": "0.5", "FERRYMQ_METRICS_MAX_QUEUES": "7",
           "FERRYMQ_CLOUDWATCH_ENABLED": "off", "FERRYMQ_CLOUDWATCH_PUBLISH_SECONDS": "2",
           "FERRYMQ_CLOUDWATCH_NAMESPACE": "FerryMQ/SQS", "FERRYMQ_WORKER_ADMIN_PORT": "9500",
           "FERRYMQ_WORKER_ADMIN_HOST": "10.0.0.5"}
    settings = Settings.from_env(env)
    assert (settings.metrics_enabled, settings.metrics_collect_seconds, settings.metrics_max_queues) == (False, 0.5, 7)
    assert (settings.cloudwatch_enabled, settings.cloudwatch_publish_seconds) == (False, 2.0)
    assert settings.cloudwatch_namespace == "FerryMQ/SQS"
    assert (settings.worker_admin_host, settings.worker_admin_port) == ("10.0.0.5", 9500)


class _Recording(dict[str, str]):
    """An environment that notes every variable looked up."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.asked: list[str] = []

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.append(key)
        return super().get(key, default)


def test_a_value_that_does_not_convert_is_refused_naming_its_own_variable() -> None:
    recording = _Recording()
    Settings.from_env(recording)
    names = sorted({name for name in recording.asked if name.startswith("FERRYMQ_")})
    assert "FERRYMQ_WORKER_CHECKPOINT_MAX_BYTES" in names and len(names) > 50
    refused = 0
    for name in names:
        # when each, alone, is given a value that is no number, flag or network
        try:
            Settings.from_env({name: "¿x?"})
        except ValueError as exc:
            # then the error names that variable, and no other
            refused += 1
            assert str(exc).startswith(f"{name}: "), (name, str(exc))
    # and the numbers (most of them) were all refused
    assert refused > 40
