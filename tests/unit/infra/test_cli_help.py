"""``--help`` of every ``ferrymq`` command lists its options and the environment variables behind it."""

from __future__ import annotations

import argparse

import pytest

from ferrymq.infra import cli

Command = tuple[tuple[str, ...], argparse.ArgumentParser]


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[Command]:
    found = [(path, parser)] if path else []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _commands(child, (*path, name))
    return found


COMMANDS = _commands(cli._parser())


def test_every_command_is_walked() -> None:
    paths = {" ".join(path) for path, _ in COMMANDS}
    assert {"up", "queues peek", "queues delete", "keys rotate", "accounts create", "usage summary",
            "credentials create", "cluster status", "log salvage"} <= paths


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_help_lists_the_options_and_the_environment(path: tuple[str, ...], parser: argparse.ArgumentParser,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([*path, "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    for action in parser._actions:
        for option in action.option_strings:
            assert option in shown
    assert "\nenvironment:\n" in shown
    assert "FERRYMQ_LOG_LEVEL" in shown
    if path[0] in cli.API_COMMANDS:
        assert "FERRYMQ_ENDPOINT_URL" in shown and "FERRYMQ_DATA_DIR" in shown
    if path[0] == "up":
        assert "FERRYMQ_WORKERS" in shown and "FERRYMQ_PORT" in shown
