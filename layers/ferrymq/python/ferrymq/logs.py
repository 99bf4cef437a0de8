"""Logging set-up shared by every FerryMQ process, and the request id that ties a request's lines together.

Each entry point calls :func:`configure` once, naming its component (``gateway``, ``worker``, ``standin``, ``up``,
``cli``). Lines go to stderr, either as JSON, one object per line::

    {"timestamp": "2025-01-31T12:00:00.123Z", "level": "WARNING", "logger": "ferrymq.frontend.pipeline",
     "message": "request 5f0c... failed: ...", "component": "gateway", "request_id": "5f0c...", ...}

(plus any ``extra=`` fields of the call, and ``exc_info`` when there is one), or as text for a human. The
long-running processes default to JSON: their stderr is a log stream (``up.log``, journald, a container's log
driver), read by tools before people. The CLI defaults to text at WARNING: its stdout is its product and its
log only a diagnosis. A process whose stderr is a terminal (``ferrymq up`` in a person's shell, its children
sharing that terminal) writes text instead: a person reads it there. ``FERRYMQ_LOG_FORMAT`` and
``FERRYMQ_LOG_LEVEL`` override all of these.

Libraries log every request they make at INFO (botocore's credential lookups, urllib3's connections, moto's and
werkzeug's request lines): below WARNING they are held back unless the level is DEBUG.

:data:`REQUEST_ID` holds the id of the request being handled: the front end sets it to the id it answers with
(SQS's ``RequestId``), the worker RPC carries it to the storage worker (:mod:`ferrymq.rpc.framing`), which sets
it while it handles the request, so both sides' lines about one request carry the same ``request_id``.
"""

from __future__ import annotations

import logging
import sys
import time
from contextvars import ContextVar
from typing import Any, TextIO

import orjson

from ferrymq.settings import Settings

REQUEST_ID: ContextVar[str | None] = ContextVar("ferrymq_request_id", default=None)
"""The id of the request this task works for; None outside any request."""

NOISY_LOGGERS = (
    "botocore",
    "boto3",
    "urllib3",
    "s3transfer",
    "moto",
    "werkzeug",
    "uvicorn.access",
    "aws_encryption_sdk",
    "asyncio",
)
"""Third-party loggers held at WARNING unless the level is DEBUG."""

FORMATS = ("json", "text")

# Attributes every LogRecord has: whatever else a record carries came from ``extra=`` and is logged as a field.
_STANDARD_ATTRIBUTES = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys() | {"message", "asctime", "request_id", "taskName"}
)


class LogSettingError(ValueError):
    """``FERRYMQ_LOG_FORMAT`` or ``FERRYMQ_LOG_LEVEL`` names no known format or level."""


def _timestamp(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


class RequestIdFilter(logging.Filter):
    """Stamps each record with the request id of the context it was logged in (unless the call named one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = REQUEST_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: timestamp (ISO-8601, UTC), level, logger, message, component, request_id
    when known, the call's extra fields, and the exception's traceback when there is one."""

    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "timestamp": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "component": self.component,
        }
        request_id = getattr(record, "request_id", None)
        if request_id is not None:
            entry["request_id"] = request_id
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRIBUTES and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack_info"] = self.formatStack(record.stack_info)
        # default=str: an extra field of any type is logged rather than lost, and never fails the line.
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    """``timestamp component LEVEL logger [request id]: message``, for a person at a terminal."""

    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        request_id = getattr(record, "request_id", None)
        where = f" [{request_id}]" if request_id else ""
        line = f"{_timestamp(record)} {self.component} {record.levelname} {record.name}{where}: {record.getMessage()}"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


def _level(name: str) -> int:
    level = logging.getLevelName(name.upper())
    if not isinstance(level, int):
        raise LogSettingError(f"FERRYMQ_LOG_LEVEL={name!r} is not a log level (DEBUG, INFO, WARNING, ERROR)")
    return level


def build_handler(component: str, log_format: str, stream: TextIO | None = None) -> logging.Handler:
    """A stderr (or ``stream``) handler formatting for ``component`` in ``log_format`` ("json" or "text")."""
    if log_format not in FORMATS:
        raise LogSettingError(f"FERRYMQ_LOG_FORMAT={log_format!r} is not one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter(component) if log_format == "json" else TextFormatter(component))
    handler.addFilter(RequestIdFilter())
    return handler


def quiet_libraries(level: int) -> None:
    """Hold the third-party loggers at WARNING, unless ``level`` is DEBUG (then they follow the root's). A logger
    a module silenced further on purpose (``aws_encryption_sdk``, see :mod:`ferrymq.sse.data_keys`) stays so."""
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if level <= logging.DEBUG:
            if logger.level == logging.WARNING:
                logger.setLevel(logging.NOTSET)
        elif logger.level < logging.WARNING:
            logger.setLevel(logging.WARNING)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        # No isatty, or a closed stream: not a terminal anyone reads.
        return False


def configure(
    component: str,
    settings: Settings,
    *,
    default_format: str = "json",
    default_level: str = "INFO",
    stream: TextIO | None = None,
) -> int:
    """Send this process's logs to stderr as ``settings`` (or the component's defaults) ask; returns the level.

    Replaces whatever handlers the root logger had, so calling it again (a test, a re-exec) does not double lines.
    """
    level = _level(settings.log_level or default_level)
    log_format = settings.log_format or ("text" if _is_terminal(stream or sys.stderr) else default_format)
    handler = build_handler(component, log_format.lower(), stream)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    quiet_libraries(level)
    # Python's own warnings (deprecations in libraries) become log lines in the same format.
    logging.captureWarnings(True)
    return level
