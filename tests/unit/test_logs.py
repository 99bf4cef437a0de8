"""The shared logging set-up: JSON and text lines, the request id from the context, the libraries held at
WARNING, and the settings behind them."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from ferrymq import logs
from ferrymq.settings import Settings
from tests.support.logging_state import restored_logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Put the root logger and the libraries' loggers back as they were: configure() changes process-wide state."""
    with restored_logging():
        yield


def _lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_the_fields_and_the_request_id_of_the_context(restore_logging: None) -> None:
    # given JSON logs for the gateway
    out = io.StringIO()
    logs.configure("gateway", Settings(), stream=out)
    # when a line is logged inside a request, with extra fields, and another outside any request
    token = logs.REQUEST_ID.set("req-1")
    try:
        logging.getLogger("ferrymq.frontend.pipeline").warning("request %s failed", "req-1", extra={"queue": "q1"})
    finally:
        logs.REQUEST_ID.reset(token)
    logging.getLogger("ferrymq.storage.server.worker").info("outside")
    # then each is one JSON object with the common fields; only the first names the request
    first, second = _lines(out)
    assert first["level"] == "WARNING"
    assert first["logger"] == "ferrymq.frontend.pipeline"
    assert first["message"] == "request req-1 failed"
    assert first["component"] == "gateway"
    assert first["request_id"] == "req-1"
    assert first["queue"] == "q1"
    assert first["timestamp"].endswith("Z") and first["timestamp"][10] == "T"
    assert "request_id" not in second
    assert second["message"] == "outside"


def test_json_lines_hold_the_traceback_and_fields_of_any_type(restore_logging: None) -> None:
    out = io.StringIO()
    logs.configure("worker", Settings(), stream=out)
    # when an exception is logged with a field JSON has no type for
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("w").exception("failed", extra={"where": object()})
    # then the line still parses, with the traceback and the field's text
    (line,) = _lines(out)
    assert "RuntimeError: boom" in line["exc_info"]
    assert line["where"].startswith("<object object")


def test_text_lines_name_component_level_logger_and_request(restore_logging: None) -> None:
    out = io.StringIO()
    logs.configure("cli", Settings(log_format="text"), stream=out)
    token = logs.REQUEST_ID.set("req-2")
    try:
        logging.getLogger("ferrymq.infra.cli").error("no stack")
    finally:
        logs.REQUEST_ID.reset(token)
    assert out.getvalue().rstrip("\n").endswith(" cli ERROR ferrymq.infra.cli [req-2]: no stack")


@pytest.mark.parametrize("name", ["botocore.credentials", "urllib3.connectionpool", "moto", "werkzeug",
                                  "uvicorn.access", "s3transfer", "boto3.resources", "asyncio"])
def test_library_info_lines_are_held_back_at_the_default_level(restore_logging: None, name: str) -> None:
    # given the default level
    out = io.StringIO()
    logs.configure("worker", Settings(), stream=out)
    library = logging.getLogger(name)
    # when a library logs at INFO and at WARNING, and FerryMQ at INFO
    library.info("Found credentials in environment variables.")
    library.warning("retrying")
    logging.getLogger("ferrymq.storage.log.recovery").info("recovered")
    # then only the library's warning and FerryMQ's line get through
    assert [(line["logger"], line["message"]) for line in _lines(out)] == [
        (name, "retrying"), ("ferrymq.storage.log.recovery", "recovered")
    ]


def test_debug_lets_the_libraries_speak(restore_logging: None) -> None:
    out = io.StringIO()
    logs.configure("worker", Settings(log_level="DEBUG"), stream=out)
    logging.getLogger("botocore.endpoint").debug("Making request")
    assert [line["message"] for line in _lines(out)] == ["Making request"]


def test_a_logger_silenced_on_purpose_stays_silenced(restore_logging: None) -> None:
    # given a library a module silenced further than WARNING (its refusals are reported as SQS errors)
    logging.getLogger("aws_encryption_sdk").setLevel(logging.CRITICAL)
    out = io.StringIO()
    logs.configure("gateway", Settings(), stream=out)
    logging.getLogger("aws_encryption_sdk").error("refused")
    assert out.getvalue() == ""


def test_configuring_again_replaces_the_handler(restore_logging: None) -> None:
    first, second = io.StringIO(), io.StringIO()
    logs.configure("worker", Settings(), stream=first)
    logs.configure("worker", Settings(), stream=second)
    logging.getLogger("x").warning("once")
    assert first.getvalue() == ""
    assert len(second.getvalue().splitlines()) == 1


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_text_unless_the_settings_name_a_format(restore_logging: None) -> None:
    terminal = _Terminal()
    logs.configure("up", Settings(), stream=terminal)
    logging.getLogger("ferrymq.infra.worker_pool").warning("worker-1 is back")
    assert terminal.getvalue().rstrip().endswith(" up WARNING ferrymq.infra.worker_pool: worker-1 is back")
    named = _Terminal()
    logs.configure("up", Settings(log_format="json"), stream=named)
    logging.getLogger("ferrymq.infra.worker_pool").warning("worker-1 is back")
    assert _lines(named)[0]["message"] == "worker-1 is back"


def test_the_component_defaults_apply_unless_the_settings_name_format_and_level(restore_logging: None) -> None:
    out = io.StringIO()
    level = logs.configure("cli", Settings(), default_format="text", default_level="WARNING", stream=out)
    logging.getLogger("ferrymq.infra").info("hidden")
    assert level == logging.WARNING and out.getvalue() == ""
    assert logs.configure("cli", Settings(log_level="INFO"), default_level="WARNING", stream=out) == logging.INFO


@pytest.mark.parametrize("settings", [Settings(log_format="xml"), Settings(log_level="LOUD")])
def test_unknown_formats_and_levels_are_refused(restore_logging: None, settings: Settings) -> None:
    with pytest.raises(logs.LogSettingError):
        logs.configure("worker", settings, stream=io.StringIO())


def test_settings_read_the_log_variables(restore_logging: None) -> None:
    settings = Settings.from_env({"FERRYMQ_LOG_FORMAT": "Text", "FERRYMQ_LOG_LEVEL": "debug"})
    assert (settings.log_format, settings.log_level) == ("Text", "debug")
    # when logging is set up from them, then case does not matter
    out = io.StringIO()
    assert logs.configure("cli", settings, stream=out) == logging.DEBUG
    assert (Settings.from_env({}).log_format, Settings.from_env({}).log_level) == (None, None)
