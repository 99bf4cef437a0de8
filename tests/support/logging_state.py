"""Put process-wide logging back as it was: ``ferrymq.logs.configure`` changes the root logger and the libraries'
loggers for the whole process, and so does starting uvicorn in process (it stops ``uvicorn.access`` propagating),
which other tests in it must not inherit."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from ferrymq import logs


@contextmanager
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    saved = {name: _state(logging.getLogger(name)) for name in logs.NOISY_LOGGERS}
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        for name, (old_level, propagate, old_handlers, disabled) in saved.items():
            logger = logging.getLogger(name)
            logger.setLevel(old_level)
            logger.propagate, logger.handlers, logger.disabled = propagate, old_handlers, disabled
        logging.captureWarnings(False)


def _state(logger: logging.Logger) -> tuple[int, bool, list[logging.Handler], bool]:
    return logger.level, logger.propagate, list(logger.handlers), logger.disabled
