"""The environment variables behind the ``ferrymq`` commands, for each command's ``--help``.

The names come from the settings object: every :class:`~ferrymq.settings.Settings` field ``name`` is read from
``FERRYMQ_<NAME>`` by ``Settings.from_env``, but for the few listed in ``_NAMED_OTHERWISE``; the defaults shown
are what ``Settings.from_env`` makes of an environment that sets none of them (for a few switches, such as
usage records and CloudWatch, that differs from the dataclass's own default). A command names the fields it
reads; :func:`epilog` writes them out with their defaults and, when set, their current values (never a
secret's).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Iterable, Mapping

from ferrymq.settings import Settings

_NAMED_OTHERWISE = {
    "extra_regions": "FERRYMQ_REGIONS",
    "aws_endpoint_url": "AWS_ENDPOINT_URL",
}
_SECRETS = frozenset({"dev_secret_key", "cluster_secret"})

ENDPOINT_FIELDS = ("endpoint_url", "data_dir", "host", "port", "tls", "tls_cert_file", "region", "dev_access_key",
                   "dev_secret_key")
"""What a command that talks to the running front end reads: where it is, and the admin key it signs with."""

STATE_FIELDS = ("data_dir", "aws_endpoint_url", "region", "table_prefix")
"""What a command that works on the stack's state directly (DynamoDB, the stand-in) reads."""

ALL_FIELDS = tuple(f.name for f in dataclasses.fields(Settings))


def env_name(field: str) -> str:
    """The variable ``Settings.from_env`` reads ``field`` from."""
    if field not in ALL_FIELDS:
        raise ValueError(f"Settings has no field {field!r}")
    return _NAMED_OTHERWISE.get(field, f"FERRYMQ_{field.upper()}")


@functools.cache
def _unset() -> Settings:
    return Settings.from_env({})


def _default(field: dataclasses.Field) -> str:  # type: ignore[type-arg]
    if field.name == "cluster_secret":
        return "unset"
    value = getattr(_unset(), field.name)
    if value is None or value == ():
        return "unset"
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def epilog(fields: Iterable[str], env: Mapping[str, str] | None = None,
           extra: Iterable[tuple[str, str]] = ()) -> str:
    """``environment:`` and one line per field: its variable, default and (not for secrets) current value; then
    the ``extra`` rows, variables read outside the settings object, as ``(variable, text)``."""
    env = os.environ if env is None else env
    by_name = {f.name: f for f in dataclasses.fields(Settings)}
    rows = []
    for name in fields:
        variable = env_name(name)
        line = f"default {_default(by_name[name])}"
        if variable in env and name not in _SECRETS:
            line += f"; now {env[variable]}"
        rows.append((variable, line))
    rows.extend(extra)
    width = max((len(v) for v, _ in rows), default=0)
    return "\n".join(["environment:", *(f"  {v.ljust(width)}  {line}" for v, line in rows)])
