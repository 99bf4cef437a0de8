"""A failed request is logged once, on one line; its traceback only when DEBUG is on."""

from __future__ import annotations

import logging

import pytest

from ferrymq.frontend.pipeline import _log_failure

LOGGER = "ferrymq.frontend.pipeline"


def _failure() -> ValueError:
    try:
        raise ValueError("x" * 500)
    except ValueError as exc:
        return exc


def test_at_the_default_level_a_failure_is_one_line_without_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    _log_failure(logging.ERROR, "req-1", "unexpected error", _failure())
    [record] = caplog.records
    assert record.levelno == logging.ERROR and record.exc_info is None
    message = record.getMessage()
    assert message.startswith("request req-1 failed: unexpected error (ValueError: xxx")
    assert "\n" not in message and len(message) < 300  # the exception's text is cut short


def test_at_debug_the_same_single_record_carries_the_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    _log_failure(logging.ERROR, "req-2", "unexpected error", _failure())
    [record] = caplog.records
    assert record.exc_info is not None and record.exc_info[0] is ValueError


def test_an_exception_that_cannot_be_printed_is_still_logged(caplog: pytest.LogCaptureFixture) -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise ValueError("no")

    caplog.set_level(logging.INFO, logger=LOGGER)
    _log_failure(logging.ERROR, "req-3", "unexpected error", Unprintable())
    assert caplog.records[0].getMessage() == "request req-3 failed: unexpected error (Unprintable: ?)"
