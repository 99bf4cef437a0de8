"""What each storage worker held at the last start of the stack, so that the next start launches the workers
before the coordination tables are read.

A worker's partitions come from the replica sets in DynamoDB. On a stack started before, ``ferrymq up``
launches each worker with what it held at the last start (this file) as soon as the stand-in serves, and checks
the AWS resources and reads the replica sets while the workers import and recover their logs. A worker whose
partitions changed meanwhile (re-replicated while the stack was down) is started again with the new ones. The
file is a hint, never the truth: without it, or for a worker it does not name, the worker is launched once the
replica sets are read, as on a first start.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from ferrymq.private_files import write_private

log = logging.getLogger(__name__)

FILE_NAME = "held-partitions.json"

Held = dict[tuple[str, str], tuple[int, ...]]
"""The partitions each worker holds, by (cluster, worker id)."""


def path(data_dir: Path) -> Path:
    return data_dir / FILE_NAME


def read(data_dir: Path) -> Held:
    """What the last start recorded; empty when there is no record or it cannot be read (named in the log)."""
    try:
        raw = json.loads(path(data_dir).read_text())
        return {
            (str(entry["cluster"]), str(entry["worker"])): tuple(_partition(p) for p in entry["partitions"])
            for entry in raw["workers"]
        }
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring %s (%s): workers start once the replica sets are read", path(data_dir), exc)
        return {}


def write(data_dir: Path, held: Mapping[tuple[str, str], tuple[int, ...]]) -> None:
    entries = [{"cluster": c, "worker": w, "partitions": list(p)} for (c, w), p in sorted(held.items())]
    write_private(path(data_dir), json.dumps({"workers": entries}).encode())


def _partition(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"not a partition number: {value!r}")
    return value
