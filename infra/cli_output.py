"""How the admin commands print: a table (rich), or one JSON document with ``--json``; progress on stderr; one
line on stderr for an error; questions on the terminal before anything dangerous."""

from __future__ import annotations

import base64
import datetime
import json
import shutil
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

# Piped output is read by scripts and people alike: wide enough that a queue URL is never cut or wrapped.
_PIPED_WIDTH = 240


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _console(stream: TextIO) -> Console:
    terminal = stream.isatty()
    width = None if terminal else max(shutil.get_terminal_size((_PIPED_WIDTH, 24)).columns, _PIPED_WIDTH)
    return Console(file=stream, width=width, highlight=False, soft_wrap=False, force_terminal=terminal or None)


class Output:
    def __init__(self, as_json: bool, out: TextIO, err: TextIO) -> None:
        self.as_json = as_json
        self.out = out
        self.err = err

    def document(self, document: Any) -> None:
        print(json.dumps(document, default=_json_default, ensure_ascii=False), file=self.out)

    def table(self, document: Any, columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None,
              empty: str | None = None) -> None:
        """``document`` as JSON with ``--json``, else ``rows`` under ``columns`` (``empty`` said when none)."""
        if self.as_json:
            self.document(document)
            return
        rows = list(rows)
        if not rows and empty is not None:
            print(empty, file=self.out)
            return
        table = Table(*columns, title=title, box=box.SIMPLE_HEAD, title_justify="left")
        for row in rows:
            table.add_row(*("-" if cell is None else str(cell) for cell in row))
        _console(self.out).print(table)

    def fields(self, document: Any, pairs: Iterable[tuple[str, Any]], title: str | None = None) -> None:
        """One record as a two-column table (JSON: ``document``)."""
        self.table(document, ("FIELD", "VALUE"), pairs, title=title)

    def say(self, line: str) -> None:
        """A line for people only: left out of ``--json`` output."""
        if not self.as_json:
            print(line, file=self.out)

    def progress(self) -> Progress:
        """A progress bar on stderr (a plain final line when stderr is no terminal)."""
        return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=_console(self.err), transient=False)


def utc(seconds: float | None) -> str | None:
    """A POSIX time as the CLI shows every time: UTC, to the second, with ``Z`` (None stays None)."""
    if seconds is None:
        return None
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def counted(n: int, noun: str) -> str:
    """``1 message``, ``2 messages``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def error(err: TextIO, message: str) -> None:
    """An error, as one line (messages from the server may span several)."""
    print(f"ferrymq: {' '.join(message.split())}", file=err)


def confirmed(question: str, what: str, stdin: TextIO, err: TextIO) -> bool:
    """Ask ``question`` on the terminal (y/N); without a terminal, refuse, saying ``what`` would happen."""
    if not stdin.isatty():
        error(err, f"{what}; without a terminal to confirm on, pass --yes")
        return False
    print(f"{question} [y/N] ", end="", file=err, flush=True)
    if stdin.readline().strip().lower() in ("y", "yes"):
        return True
    error(err, "nothing changed")
    return False
