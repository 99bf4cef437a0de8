"""``ferrymq accounts list|create|limits``, ``ferrymq keys create|list|disable|enable|rotate|delete`` and
``ferrymq usage summary``: FerryMQ's own admin actions through the running front end, with the admin key
(:mod:`ferrymq.infra.stack_client`). ``ferrymq credentials`` does the key work on the stack's state directly, and works
with no stack running."""

from __future__ import annotations

import argparse
import secrets
from collections.abc import Callable
from typing import Any, TextIO

from ferrymq.aws.credentials import MAX_TEMPORARY_SECONDS
from ferrymq.infra.cli_output import Output
from ferrymq.infra.stack_client import StackClients

KEY_COLUMNS = ("ACCESS KEY ID", "ACCOUNT", "USER", "STATUS", "ADMIN", "EXPIRES", "CREATED")
# How many random account ids `accounts create` tries before giving up (a clash is one in 10^12 per account).
_ACCOUNT_ATTEMPTS = 5


def add_parsers(commands: Any, account_id: Callable[[str], str], duration: Callable[[str], int]) -> None:
    """``account_id`` and ``duration``: the argument types ``ferrymq credentials`` checks its options with."""
    def group(name: str, text: str) -> Any:
        parser = commands.add_parser(name, help=text, description=text)
        return parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(actions: Any, name: str, text: str) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=text, description=text)
        parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
        return parser

    accounts = group("accounts", "accounts: the account ids that hold access keys")
    action(accounts, "list", "accounts with their keys and users")
    create = action(accounts, "create", "a new account: its first access key (printed with its secret)")
    create.add_argument("--account", type=account_id, help="its 12-digit id (default: a new random one)")
    create.add_argument("--user", default="admin", help="user name of its first key (default admin)")
    create.add_argument("--admin", action="store_true", help="make the key an admin key")
    action(accounts, "limits", "an account's limits on queues and shards (FERRYMQ_ACCOUNT_MAX_QUEUES, "
           "FERRYMQ_ACCOUNT_MAX_SHARDS) and how much of them it uses").add_argument(
        "account", metavar="ACCOUNT", type=account_id, help="12-digit account id")

    keys = group("keys", "access keys: create, list, disable, enable, rotate, delete")
    create = action(keys, "create", "an access key (printed with its secret)")
    create.add_argument("--account", required=True, type=account_id, help="12-digit account id the key belongs to")
    create.add_argument("--user", required=True, help="user name recorded with the key")
    create.add_argument("--admin", action="store_true", help="an admin key: FerryMQ's admin actions, any queue's "
                        "statistics and peeks")
    create.add_argument("--temporary", action="store_true", help="temporary credentials: an ASIA key that works "
                        "only with the session token printed with it, until it expires")
    create.add_argument("--duration-seconds", type=duration, metavar="N",
                        help=f"how long temporary credentials work, 1..{MAX_TEMPORARY_SECONDS}")
    action(keys, "list", "access keys, without their secrets").add_argument(
        "--account", type=account_id, help="only this account's keys")
    for verb, text in (("disable", "disable a key (refused from then on; it keeps its secret)"),
                       ("enable", "enable a disabled key"),
                       ("rotate", "a new key for the same account and user, and the old one disabled"),
                       ("delete", "delete a key")):
        action(keys, verb, text).add_argument("key_id", metavar="KEY_ID")

    usage = group("usage", "usage: requests, billing units, messages and bytes per account, from the usage records")
    summary = action(usage, "summary", "one UTC day's usage per account and action")
    summary.add_argument("--date", help="the day, YYYY-MM-DD (default today, UTC)")
    summary.add_argument("--account", type=account_id, help="only this account")


def run(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    api = clients.ferrymq
    if args.command == "usage":
        return _usage(api, args, output)
    if args.command == "accounts":
        accounts: dict[str, Callable[[Any, argparse.Namespace, Output], int]] = {
            "list": lambda api, _, output: _accounts_list(api, output),
            "create": _accounts_create,
            "limits": _accounts_limits,
        }
        return accounts[args.action](api, args, output)
    if args.action == "create":
        return _keys_create(api, args, output)
    if args.action == "list":
        return _keys_list(api, args, output)
    return _key_change(api, args, output)


def key_rows(keys: list[dict]) -> list[tuple]:
    return [(k["AccessKeyId"], k["AccountId"], k["UserName"], k["Status"], "yes" if k.get("Admin") else "no",
             k.get("Expiration"), k.get("CreatedAt")) for k in keys]


def print_created(key: dict, output: Output) -> int:
    pairs = [("access key id", key["AccessKeyId"]), ("secret access key", key["SecretAccessKey"])]
    if key.get("SessionToken"):
        pairs += [("session token", key["SessionToken"]), ("expires", key.get("Expiration"))]
    pairs += [("account", key["AccountId"]), ("user", key["UserName"]), ("admin", "yes" if key.get("Admin") else "no")]
    output.fields(key, pairs)
    return 0


def _keys_create(api: Any, args: argparse.Namespace, output: Output) -> int:
    if args.duration_seconds is not None and not args.temporary:
        raise ValueError("--duration-seconds is for --temporary credentials")
    request: dict[str, Any] = {"AccountId": args.account, "UserName": args.user, "Admin": args.admin}
    if args.temporary:
        request["DurationSeconds"] = args.duration_seconds or 43_200
    return print_created(api.create_access_key(**request)["AccessKey"], output)


def _keys_list(api: Any, args: argparse.Namespace, output: Output) -> int:
    request = {"AccountId": args.account} if args.account else {}
    keys = [k for page in api.get_paginator("list_access_keys").paginate(**request) for k in page["AccessKeys"]]
    output.table({"AccessKeys": keys}, KEY_COLUMNS, key_rows(keys), empty="no access keys")
    return 0


def _key_change(api: Any, args: argparse.Namespace, output: Output) -> int:
    if args.action == "rotate":
        rotated = api.rotate_access_key(AccessKeyId=args.key_id)
        output.say(f"disabled {rotated['DisabledAccessKeyId']}; its replacement:")
        key = rotated["AccessKey"]
        if output.as_json:
            output.document({"AccessKey": key, "DisabledAccessKeyId": rotated["DisabledAccessKeyId"]})
            return 0
        return print_created(key, output)
    call = {"disable": api.disable_access_key, "enable": api.enable_access_key, "delete": api.delete_access_key}
    call[args.action](AccessKeyId=args.key_id)
    done = {"disable": "disabled", "enable": "enabled", "delete": "deleted"}[args.action]
    output.table({"AccessKeyId": args.key_id, "Done": done}, ("ACCESS KEY ID", "DONE"), [(args.key_id, done)])
    return 0


def _accounts(api: Any) -> list[dict]:
    return list(api.list_accounts()["Accounts"])


def _accounts_list(api: Any, output: Output) -> int:
    accounts = _accounts(api)
    rows = [(a["AccountId"], a["Keys"], a["ActiveKeys"], a["AdminKeys"], ", ".join(a.get("Users", [])))
            for a in accounts]
    output.table({"Accounts": accounts}, ("ACCOUNT", "KEYS", "ACTIVE", "ADMIN", "USERS"), rows, empty="no accounts")
    return 0


def _accounts_create(api: Any, args: argparse.Namespace, output: Output) -> int:
    taken = {a["AccountId"] for a in _accounts(api)}
    account = args.account
    if account is None:
        account = next((a for a in (_random_account() for _ in range(_ACCOUNT_ATTEMPTS)) if a not in taken), None)
        if account is None:
            raise ValueError("could not pick an unused account id; name one with --account")
    elif account in taken:
        raise ValueError(f"account {account} exists already; `ferrymq keys create --account {account}` adds a key")
    key = api.create_access_key(AccountId=account, UserName=args.user, Admin=args.admin)["AccessKey"]
    return print_created(key, output)


def _accounts_limits(api: Any, args: argparse.Namespace, output: Output) -> int:
    limits = api.get_account_limits(AccountId=args.account)
    limits.pop("ResponseMetadata", None)
    rows = [("queues", limits["Queues"], limits["MaxQueues"]), ("shards", limits["Shards"], limits["MaxShards"])]
    output.table(limits, ("", "USED", "LIMIT"), rows, title=f"account {limits['AccountId']}")
    return 0


def _random_account() -> str:
    # Never 000000000000, the development account, and never a leading zero that a spreadsheet would eat.
    return str(secrets.randbelow(9 * 10**11) + 10**11)


def _usage(api: Any, args: argparse.Namespace, output: Output) -> int:
    request = {k: v for k, v in (("Date", args.date), ("AccountId", args.account)) if v}
    summary = api.get_usage_summary(**request)
    summary.pop("ResponseMetadata", None)
    if not summary["Records"] and not output.as_json:
        where = f" of account {args.account}" if args.account else ""
        output.say(f"no usage records{where} for {summary['Date']} yet (front ends upload them every "
                   "FERRYMQ_USAGE_FLUSH_SECONDS; records are off with FERRYMQ_USAGE_ENABLED=0)")
        return 0
    rows = [(a["AccountId"], action["Action"], action["Requests"], action["Errors"]) for a in summary["Accounts"]
            for action in a["Actions"]]
    rows += [(a["AccountId"], "(all)", a["Requests"], a["Errors"]) for a in summary["Accounts"]]
    totals = [(a["AccountId"], a["Requests"], a["BillableUnits"], a["Errors"], a["MessagesIn"], a["MessagesOut"],
               a["BytesIn"], a["BytesOut"]) for a in summary["Accounts"]]
    if output.as_json:
        output.document(summary)
        return 0
    output.table(summary, ("ACCOUNT", "REQUESTS", "UNITS", "ERRORS", "MSGS IN", "MSGS OUT", "BYTES IN", "BYTES OUT"),
                 totals, title=f"usage on {summary['Date']} ({summary['Records']} records)")
    output.table(summary, ("ACCOUNT", "ACTION", "REQUESTS", "ERRORS"), rows)
    if summary.get("Truncated"):
        output.say("(more objects than one summary reads: run `ferrymq spark report` for the whole day)")
    return 0
