"""The storage worker process, one module per concern.

- :mod:`.config`: what a worker is configured with;
- :mod:`.worker`: :class:`StorageWorker`, its life cycle (open, listen, close) and the routing of each
  request to the partition it names;
- :mod:`.replica`: one served partition's log, engine, long polls, hand-overs, move tasks and sweeps;
- :mod:`.layout`: the partitions' log directories, and the move from the single-partition layout;
- :mod:`.connection`: the RPC transport (frames in, batched replies out);
- :mod:`.handlers`: one handler per RPC operation, with its argument checks;
- :mod:`.long_poll`: receives that wait for their queue;
- :mod:`.maintenance`: compaction's fold and periodic sweeps;
- :mod:`.process`: process start-up, registration and shutdown (:func:`run_worker`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ferrymq.storage.server.config import WorkerConfig
    from ferrymq.storage.server.maintenance import fold
    from ferrymq.storage.server.process import READY_LINE, run_worker
    from ferrymq.storage.server.worker import StorageWorker

__all__ = ["READY_LINE", "StorageWorker", "WorkerConfig", "fold", "run_worker"]

_HOMES = {"READY_LINE": "process", "StorageWorker": "worker", "WorkerConfig": "config", "fold": "maintenance",
          "run_worker": "process"}
"""Where each name lives. They are imported on first use: ``ferrymq up`` and the admin commands read
:mod:`.layout` alone, without the worker's imports (asyncio servers, the engine, prometheus, botocore clients)."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
