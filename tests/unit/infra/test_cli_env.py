"""The environment lists of the commands' --help: every variable named is the one Settings.from_env reads."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from ferrymq.infra.cli_env import ALL_FIELDS, ENDPOINT_FIELDS, env_name, epilog
from ferrymq.settings import Settings

# Tuple settings whose items must have a form of their own (the rest take any word).
_TUPLE_SAMPLES = {"push_allowed_networks": ("10.1.0.0/16", ("10.1.0.0/16",))}


def _sample(value: Any, field: str = "") -> tuple[str, Any]:
    """A value unlike the default, as the environment spells it and as Settings holds it."""
    if field in _TUPLE_SAMPLES:
        return _TUPLE_SAMPLES[field]
    if isinstance(value, bool):
        return ("0", False) if value else ("1", True)
    if isinstance(value, int):
        return str(value + 7), value + 7
    if isinstance(value, float):
        return str(value + 7.5), value + 7.5
    if isinstance(value, Path):
        return "/elsewhere", Path("/elsewhere")
    if isinstance(value, tuple):
        return "eu-west-3", ("eu-west-3",)
    return "changed", "changed"


@pytest.mark.parametrize("field", ALL_FIELDS)
def test_each_field_is_read_from_the_variable_the_help_names(field: str) -> None:
    spec = next(f for f in dataclasses.fields(Settings) if f.name == field)
    default = getattr(Settings(), field)
    if default is None:
        default = Path("/x") if "file" in field or "dir" in field else ""
    text, expected = _sample(default, field)
    read = getattr(Settings.from_env({env_name(field): text}), field)
    assert read == expected, f"{env_name(field)}={text} did not set {spec.name}"


def test_the_epilog_lists_variables_with_defaults_and_never_a_secret_s_value() -> None:
    shown = epilog(ENDPOINT_FIELDS, env={"FERRYMQ_ENDPOINT_URL": "http://mq:1", "FERRYMQ_DEV_SECRET_KEY": "hush"},
                   extra=[("FERRYMQ_LOG_LEVEL", "default WARNING")])
    lines = shown.splitlines()
    assert lines[0] == "environment:"
    assert any(line.split()[:4] == ["FERRYMQ_ENDPOINT_URL", "default", "unset;", "now"] for line in lines)
    assert any(line.split()[:3] == ["FERRYMQ_PORT", "default", "9324"] for line in lines)
    assert "hush" not in shown
    assert lines[-1].split() == ["FERRYMQ_LOG_LEVEL", "default", "WARNING"]


def test_an_unknown_field_is_refused() -> None:
    with pytest.raises(ValueError, match="no field"):
        env_name("no_such_setting")


def test_the_defaults_shown_are_what_an_environment_setting_none_of_them_gives() -> None:
    # usage records and CloudWatch are on unless turned off, though code that builds Settings() has them off
    text = epilog(["usage_enabled", "cloudwatch_enabled", "port"], env={})
    assert "FERRYMQ_USAGE_ENABLED" in text and "FERRYMQ_CLOUDWATCH_ENABLED" in text
    for line in text.splitlines()[1:3]:
        assert line.endswith("default 1"), line
    assert Settings.from_env({}).cloudwatch_enabled and not Settings().cloudwatch_enabled
