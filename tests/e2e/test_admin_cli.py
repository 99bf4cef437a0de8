"""``ferrymq queues|accounts|keys|usage`` through the real entry point, against the session's running stack: tables
and ``--json``, confirmation before deleting and purging, and one-line errors for bad input."""

from __future__ import annotations

import datetime
import json
import os
import pty
import subprocess
import uuid
from typing import Any

import pytest

from ferrymq.infra.up_process import ferrymq_command
from tests.e2e.conftest import Stack, new_queue
from tests.support.waiting import wait_for


def cli(stack: Stack, *args: str, stdin: Any = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    """``ferrymq ARGS`` against the stack, whatever its exit status."""
    return subprocess.run([*ferrymq_command(), *args], env=stack.env, stdin=stdin, capture_output=True, text=True,
                          timeout=90, check=False)


def json_of(stack: Stack, *args: str) -> Any:
    return json.loads(stack.ferrymq(*args, "--json"))


def answered_on_a_terminal(stack: Stack, answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``ferrymq ARGS`` with a terminal as its input, given ``answer``."""
    main, terminal = pty.openpty()
    try:
        os.write(main, f"{answer}\n".encode())
        return cli(stack, *args, stdin=terminal)
    finally:
        os.close(terminal)
        os.close(main)


def refused_in_one_line(result: subprocess.CompletedProcess[str], status: int, *words: str) -> None:
    assert result.returncode == status, result
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert all(word in lines[0] for word in words), lines[0]


def name_of(url: str) -> str:
    return url.rsplit("/", 1)[-1]


def test_queue_commands_print_tables_and_json(stack: Stack, sdk: Any) -> None:
    # given a queue holding three messages, one of them in flight
    url = new_queue(sdk, "cli-list")
    for body in ("one", "two", "three"):
        sdk.send_message(QueueUrl=url, MessageBody=body)
    sdk.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=300)
    name = name_of(url)
    # then the list has it, as a table row and in JSON
    assert any(line.split()[:3] == [name, "standard", url] for line in stack.ferrymq("queues", "list").splitlines())
    assert {"Name": name, "Type": "standard", "QueueUrl": url} in json_of(
        stack, "queues", "list", "--prefix", "cli-list")["Queues"]
    # and describe shows its attributes
    described = json_of(stack, "queues", "describe", name)
    assert (described["QueueUrl"], described["Attributes"]["ApproximateNumberOfMessages"]) == (url, "2")
    assert any(line.split() == ["ApproximateNumberOfMessagesNotVisible", "1"]
               for line in stack.ferrymq("queues", "describe", name).splitlines())
    # and stats count visible and in-flight messages, per shard and in all
    stats = json_of(stack, "queues", "stats", name)
    assert (stats["Visible"], stats["InFlight"], stats["Delayed"]) == (2, 1, 0)
    assert stats["OldestMessageAgeSeconds"] >= 0
    assert any(line.split()[:5] == ["all", "-", "2", "1", "0"] for line in stack.ferrymq("queues", "stats", name)
               .splitlines())
    # and peek shows the visible ones, oldest first, in a table and in JSON
    assert [m["Body"] for m in json_of(stack, "queues", "peek", name)["Messages"]] == ["two", "three"]
    table = stack.ferrymq("queues", "peek", name, "-n", "1").splitlines()
    assert [line.split()[-1] for line in table if line.strip().endswith(("two", "three"))] == ["two"]
    sent = next(line.split()[1] for line in table if line.strip().endswith("two"))
    assert sent.endswith("Z") and datetime.datetime.fromisoformat(sent).tzinfo == datetime.UTC


def test_delete_asks_first_and_is_refused_without_a_terminal(stack: Stack, sdk: Any) -> None:
    url = new_queue(sdk, "cli-delete")
    name = name_of(url)
    # without a terminal and without --yes, nothing is deleted
    refused_in_one_line(cli(stack, "queues", "delete", name), 1, "--yes")
    # answered "n" on a terminal, nothing is deleted either
    declined = answered_on_a_terminal(stack, "n", "queues", "delete", name)
    assert declined.returncode == 1 and "nothing changed" in declined.stderr
    assert f"delete queue {name}" in declined.stderr
    assert sdk.get_queue_url(QueueName=name)["QueueUrl"] == url
    # answered "y", it is deleted
    assert answered_on_a_terminal(stack, "y", "queues", "delete", name).returncode == 0
    refused_in_one_line(cli(stack, "queues", "stats", name), 1, "QueueDoesNotExist")
    # and --yes deletes without asking
    other = name_of(new_queue(sdk, "cli-delete"))
    assert json_of(stack, "queues", "delete", other, "--yes")["Deleted"] is True
    refused_in_one_line(cli(stack, "queues", "describe", other), 1, "QueueDoesNotExist")


def test_purge_asks_first_then_empties_the_queue(stack: Stack, sdk: Any) -> None:
    url = new_queue(sdk, "cli-purge")
    name = name_of(url)
    sdk.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(10)])
    refused_in_one_line(cli(stack, "queues", "purge", name), 1, "--yes", "10 messages")
    assert json_of(stack, "queues", "stats", name)["Visible"] == 10
    purged = json_of(stack, "queues", "purge", name, "--yes")
    assert (purged["Purged"], purged["Left"]) == (10, 0)
    assert json_of(stack, "queues", "stats", name)["Visible"] == 0
    # and one message is "1 message"
    sdk.send_message(QueueUrl=url, MessageBody="last")
    refused_in_one_line(cli(stack, "queues", "purge", name), 1, f"purging {name} deletes its 1 message;")


def test_redrive_moves_a_dead_letter_queue_back_and_reports_the_task(stack: Stack, sdk: Any) -> None:
    # given messages that went to a dead-letter queue after one receive
    dlq = new_queue(sdk, "cli-dlq")
    dlq_arn = sdk.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "1"})
    source = new_queue(sdk, "cli-source", RedrivePolicy=policy)
    sdk.send_message_batch(QueueUrl=source, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(4)])
    assert len(sdk.receive_message(QueueUrl=source, MaxNumberOfMessages=10, VisibilityTimeout=0)["Messages"]) == 4
    sdk.receive_message(QueueUrl=source, MaxNumberOfMessages=10)
    wait_for(lambda: json_of(stack, "queues", "stats", name_of(dlq))["Visible"] == 4)
    # when redriven, then the command waits for the task and reports it done
    task = json_of(stack, "queues", "redrive", name_of(dlq))
    assert (task["Status"], task["ApproximateNumberOfMessagesMoved"]) == ("COMPLETED", 4)
    assert json_of(stack, "queues", "stats", name_of(source))["Visible"] == 4


def test_peek_on_a_sharded_queue_gathers_the_shards_oldest_first(stack: Stack, sdk: Any) -> None:
    url = new_queue(sdk, "cli-sharded", FerryMQShardCount="3")
    for i in range(6):
        sdk.send_message(QueueUrl=url, MessageBody=f"s{i}")
    stats = json_of(stack, "queues", "stats", url)
    assert len(stats["Shards"]) == 3 and sum(s["Visible"] for s in stats["Shards"]) == stats["Visible"] == 6
    peeked = json_of(stack, "queues", "peek", url, "-n", "20")["Messages"]
    assert sorted(m["Body"] for m in peeked) == [f"s{i}" for i in range(6)]
    assert [m["SentTimestamp"] for m in peeked] == sorted(m["SentTimestamp"] for m in peeked)


def test_keys_and_accounts(stack: Stack) -> None:
    account = f"9{uuid.uuid4().int % 10**11:011d}"
    # a key made through the API is listed, with its account, and without its secret
    made = json_of(stack, "keys", "create", "--account", account, "--user", "bob")
    assert (made["AccountId"], made["UserName"], made["Admin"], made["Status"]) == (account, "bob", False, "Active")
    listed = json_of(stack, "keys", "list", "--account", account)["AccessKeys"]
    assert [(k["AccessKeyId"], "SecretAccessKey" in k) for k in listed] == [(made["AccessKeyId"], False)]
    table = stack.ferrymq("keys", "list", "--account", account).splitlines()
    assert any(line.split()[:5] == [made["AccessKeyId"], account, "bob", "Active", "no"] for line in table)
    # rotating gives a new key and disables the old one
    rotated = json_of(stack, "keys", "rotate", made["AccessKeyId"])
    assert rotated["DisabledAccessKeyId"] == made["AccessKeyId"] and rotated["AccessKey"]["SecretAccessKey"]
    statuses = {k["AccessKeyId"]: k["Status"] for k in json_of(stack, "keys", "list", "--account", account)[
        "AccessKeys"]}
    assert statuses == {made["AccessKeyId"]: "Inactive", rotated["AccessKey"]["AccessKeyId"]: "Active"}
    # enable, disable and delete change it, and the accounts list counts what is left
    stack.ferrymq("keys", "enable", made["AccessKeyId"])
    stack.ferrymq("keys", "delete", rotated["AccessKey"]["AccessKeyId"])
    accounts = {a["AccountId"]: a for a in json_of(stack, "accounts", "list")["Accounts"]}
    assert (accounts[account]["Keys"], accounts[account]["ActiveKeys"], accounts[account]["Users"]) == (1, 1, ["bob"])
    assert accounts["000000000000"]["AdminKeys"] >= 1  # the development key `ferrymq up` made
    # an account made without an id gets a new 12-digit one, with an admin key when asked
    created = json_of(stack, "accounts", "create", "--admin")
    assert len(created["AccountId"]) == 12 and created["AccountId"].isdigit() and created["Admin"] is True
    # the direct commands see the same keys, the admin flag included
    direct = {k["AccessKeyId"]: k for k in json.loads(stack.ferrymq("credentials", "list", "--json"))}
    assert direct[created["AccessKeyId"]]["Admin"] is True and "Admin" not in direct[made["AccessKeyId"]]


def test_bad_input_is_refused_in_one_line(stack: Stack) -> None:
    refused_in_one_line(cli(stack, "queues", "stats", "no-such-queue"), 1, "QueueDoesNotExist")
    refused_in_one_line(cli(stack, "queues", "peek", "no-such-queue", "--json"), 1, "QueueDoesNotExist")
    for bad in ("12", "1111222233334", "11112222333x", "١١١١٢٢٢٢٣٣٣٣"):
        refused_in_one_line(cli(stack, "keys", "create", "--account", bad, "--user", "u"), 2, "12 digits")
    refused_in_one_line(cli(stack, "accounts", "create", "--account", "000000000000"), 2, "exists already")
    refused_in_one_line(cli(stack, "keys", "disable", "AKIANOSUCHKEY0000000"), 1, "AKIANOSUCHKEY0000000")
    refused_in_one_line(cli(stack, "queues", "peek", "x", "-n", "1000"), 2, "between 1 and 100")
    refused_in_one_line(cli(stack, "usage", "summary", "--date", "2026-02-30"), 1, "InvalidParameterValue", "Date")
    refused_in_one_line(cli(stack, "keys", "create", "--account", "111122223333", "--user", "u",
                            "--duration-seconds", "60"), 2, "--temporary")
    refused_in_one_line(cli(stack, "queues", "nonsense"), 2, "invalid choice")


def test_usage_summary_sums_records_once_there_are_some(stack: Stack, sdk: Any) -> None:
    # a day without records gets a clear empty answer
    empty = json_of(stack, "usage", "summary", "--date", "2001-01-01")
    assert (empty["Date"], empty["Records"], empty["Accounts"]) == ("2001-01-01", 0, [])
    assert "no usage records" in stack.ferrymq("usage", "summary", "--date", "2001-01-01")
    # and once the front end has uploaded today's records, they are summed per account and action
    url = new_queue(sdk, "cli-usage")
    sdk.send_message(QueueUrl=url, MessageBody="counted")
    today = datetime.datetime.now(datetime.UTC).date().isoformat()

    def sends() -> Any:
        summary = json_of(stack, "usage", "summary", "--account", "000000000000", "--date", today)
        actions = {a["Action"]: a["Requests"] for acc in summary["Accounts"] for a in acc["Actions"]}
        return summary if actions.get("SendMessage") else None

    summary = wait_for(sends, timeout=60)
    assert [a["AccountId"] for a in summary["Accounts"]] == ["000000000000"]
    assert summary["Accounts"][0]["MessagesIn"] >= 1 and summary["Records"] >= 1
    assert "SendMessage" in stack.ferrymq("usage", "summary", "--account", "000000000000", "--date", today)


@pytest.mark.parametrize("command", [("queues", "delete"), ("keys", "create"), ("usage", "summary")])
def test_help_lists_options_and_the_variables_behind_them(stack: Stack, command: tuple[str, ...]) -> None:
    shown = stack.ferrymq(*command, "--help")
    assert "--json" in shown and "environment:" in shown
    assert "FERRYMQ_ENDPOINT_URL" in shown and "FERRYMQ_DEV_ACCESS_KEY" in shown
