"""``ferrymq push`` against the session's stack: create (the secret shown once), list, describe, disable, enable and
delete a mapping, as tables and JSON; bad input refused in one line."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.conftest import Stack, new_queue
from tests.e2e.test_admin_cli import cli, json_of, refused_in_one_line


def test_push_commands_manage_a_mapping(stack: Stack, sdk: Any) -> None:
    # given a queue
    url = new_queue(sdk, "cli-pushed")
    name = url.rsplit("/", 1)[-1]
    # when a mapping is created from the command line
    created = json_of(stack, "push", "create", "--queue", name, "--url", "http://127.0.0.1:9/cli", "--batch-size",
                      "50", "--window", "2", "--report-failures", "--max-concurrency", "4", "--filter",
                      '{"body": ["x"]}')
    # then it is the API's mapping, with its secret shown this once
    assert created["Destination"] == {"Url": "http://127.0.0.1:9/cli"} and created["SigningSecret"]
    assert (created["BatchSize"], created["MaximumBatchingWindowInSeconds"]) == (50, 2)
    assert created["ScalingConfig"] == {"MaximumConcurrency": 4}
    assert created["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    mapping_id = created["UUID"]
    described = json_of(stack, "push", "describe", mapping_id)
    assert described["UUID"] == mapping_id and "SigningSecret" not in described
    assert mapping_id in stack.ferrymq("push", "list", "--queue", name)
    assert [m["UUID"] for m in json_of(stack, "push", "list", "--queue", name)["EventSourceMappings"]] == [mapping_id]
    # and it is disabled and enabled again, and deleted
    assert json_of(stack, "push", "disable", mapping_id)["State"] == "Disabled"
    assert "Enabled" in stack.ferrymq("push", "enable", mapping_id)
    rotated = json_of(stack, "push", "rotate-secret", mapping_id)
    assert rotated["SigningSecret"] not in ("", created["SigningSecret"])
    refused_in_one_line(cli(stack, "push", "delete", mapping_id), 1, "--yes")
    assert json_of(stack, "push", "delete", mapping_id, "--yes")["State"] == "Deleting"
    assert "no event-source mappings" in stack.ferrymq("push", "list", "--queue", name)


def test_push_create_refuses_bad_input_in_one_line(stack: Stack, sdk: Any) -> None:
    name = new_queue(sdk, "cli-pushed", fifo=True).rsplit("/", 1)[-1]
    refused_in_one_line(cli(stack, "push", "create", "--queue", name, "--url", "http://127.0.0.1:9/", "--window", "1"),
                        1, "InvalidParameterValueException", "FIFO")
    refused_in_one_line(cli(stack, "push", "create", "--queue", name, "--url", "ftp://x/"), 1,
                        "InvalidParameterValueException")
    refused_in_one_line(cli(stack, "push", "create", "--queue", name, "--url", "http://h/", "--filter", "{nope"), 2)
    refused_in_one_line(cli(stack, "push", "describe", "0" * 36), 1, "ResourceNotFoundException")
    assert json.loads(stack.ferrymq("push", "list", "--queue", name, "--json")) == {"EventSourceMappings": []}
