"""How long each stage of a job takes: one line per stage as it ends, and the figures for the job's summary."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


class Stages:
    """Seconds per stage, in the order they ran; each also printed as ``ferrymq spark: <stage> <seconds> s`` on
    ``out`` when one is given (the job entries give stderr: the summary on stdout stays one JSON object)."""

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            took = time.monotonic() - started
            self.seconds[name] = round(self.seconds.get(name, 0.0) + took, 3)
            if self._out is not None:
                print(f"ferrymq spark: {name} {took:.2f} s", file=self._out, flush=True)

    def of(self, job: str, *shared: str) -> dict[str, float]:
        """The stages named ``<job>/...``, and those of ``shared`` (stages several jobs used), for ``job``'s
        summary."""
        return {k: v for k, v in self.seconds.items() if k in shared or k.startswith(f"{job}/")}
