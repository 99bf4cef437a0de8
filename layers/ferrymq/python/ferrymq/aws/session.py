"""boto3 clients built one way everywhere.

Endpoints are left to boto3, which honours ``AWS_ENDPOINT_URL`` and ``AWS_ENDPOINT_URL_<SERVICE>``. Each client
has a session of its own (credentials and settings are read when it is made), but every session of the process
reads botocore's data files (service models, endpoint rules: large JSON files) through one loader, so that each
file is parsed once per process rather than once per client: a client then costs about a quarter of the CPU it
did, which every process of a stack pays several times over while it starts.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.loaders import Loader, create_loader

from ferrymq.settings import Settings

_CONFIG = Config(
    retries={"max_attempts": 3, "mode": "standard"},
    connect_timeout=5,
    read_timeout=30,
    s3={"addressing_style": "path"},
    max_pool_connections=32,
)


LEASE_CALL_SHARE = 4
"""A lease write's connect and read timeouts are each this fraction of the lease (one attempt, no retries)."""


def lease_config(lease_seconds: float) -> Config:
    """The botocore config for coordination calls that hold leases: one attempt, with connect and read timeouts
    of a quarter of the lease each, so that a call ends (answered or failed) within half the lease and the
    next renewal, a third of a lease later, is not held up; a call that failed is made again by the next
    controller pass, never by a hidden SDK retry that could outlast the lease."""
    share = max(lease_seconds / LEASE_CALL_SHARE, 0.05)
    return _CONFIG.merge(
        Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=share, read_timeout=share)
    )


_BOTO3_DATA_PATH = os.path.join(os.path.dirname(boto3.__file__), "data")


class _SharedLoader(Loader):
    """botocore's loader, shared by the sessions of one process. A boto3 session adds boto3's own data directory
    to its loader's search path each time one is made: this loader has it from the start and hands out a copy of
    its search path, so that the additions do not pile up in it."""

    def __init__(self, data_path: str | None) -> None:
        super().__init__(extra_search_paths=[*create_loader(data_path).search_paths, _BOTO3_DATA_PATH],
                         include_default_search_paths=False)

    @property
    def search_paths(self) -> list[str]:
        return list(self._search_paths)


@functools.cache
def _shared_loader(data_path: str | None) -> Loader:
    """The loader of the sessions whose ``AWS_DATA_PATH`` is ``data_path``."""
    return _SharedLoader(data_path)


def new_session() -> boto3.session.Session:
    """A boto3 session of its own, reading botocore's data through the process's shared loader."""
    core = botocore.session.Session()
    core.register_component("data_loader", _shared_loader(core.get_config_variable("data_path")))
    return boto3.session.Session(botocore_session=core)


def client(service: str, settings: Settings, *, config: Config | None = None) -> Any:
    """A boto3 client for ``service`` in the settings' region (``config``: instead of the default one, e.g.
    :func:`lease_config`)."""
    return new_session().client(service, region_name=settings.region, config=config or _CONFIG)
