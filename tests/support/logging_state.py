"""Put process-wide logging back as it was: ``ferrymq.logs.configure`` changes the root logger and the libraries'
loggers for the whole process, which other tests in it must not inherit."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from ferrymq import logs


@contextmanager
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in logs.NOISY_LOGGERS}
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)
        for name, old in levels.items():
            logging.getLogger(name).setLevel(old)
        logging.captureWarnings(False)
