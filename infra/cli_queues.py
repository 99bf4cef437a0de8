"""``ferrymq queues list|describe|stats|peek|purge|redrive|delete``: queues through the running front end, with
the admin key (:mod:`ferrymq.infra.stack_client`): SQS's own actions for what SQS has, FerryMQ's for statistics and
peeking. A queue is named by its name (the admin key's account) or by its URL (any account, for ``stats`` and
``peek``)."""

from __future__ import annotations

import argparse
import datetime
import time
from collections.abc import Callable
from typing import Any, TextIO

from ferrymq.infra.cli_output import Output, confirmed, counted, utc
from ferrymq.infra.stack_client import StackClients
from ferrymq.limits import MAX_PEEK_MESSAGES

POLL_SECONDS = 0.5
BODY_COLUMN = 60
# A purge is over once nothing is left, or once what is left has stopped going down (new sends since).
PURGE_STEADY_POLLS = 3
REDRIVE_DONE = frozenset({"COMPLETED", "CANCELLED", "FAILED"})


def add_parsers(commands: Any) -> None:
    queues = commands.add_parser("queues", help="queues: list, describe, stats, peek, purge, redrive, delete")
    actions = queues.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, text: str, *, queue: bool = True) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=text, description=text)
        if queue:
            parser.add_argument("queue", metavar="QUEUE", help="a queue name (the admin key's account) or URL")
        parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
        return parser

    action("list", "queues of the admin key's account", queue=False).add_argument(
        "--prefix", default="", help="only queues whose name starts with this")
    action("describe", "a queue's attributes and tags")
    action("stats", "visible, in-flight and delayed messages, and the oldest message's age, per shard")
    action("peek", "visible messages, oldest first, without receiving them (nothing changes)").add_argument(
        "-n", "--max", type=_peek_count, default=10, metavar="N",
        help=f"how many messages, 1 to {MAX_PEEK_MESSAGES} (default 10)")
    for name, text in (("purge", "delete every message of a queue"), ("delete", "delete a queue and its messages")):
        action(name, text).add_argument("--yes", action="store_true", help="do not ask for confirmation")
    redrive = action("redrive", "move a dead-letter queue's messages back to their sources (or to --to), "
                                "showing progress until the move task is done")
    redrive.add_argument("--to", metavar="QUEUE", help="move them to this queue instead")
    redrive.add_argument("--max-per-second", type=int, metavar="N", help="move at most N messages a second")


def _peek_count(text: str) -> int:
    count = int(text)
    if not 1 <= count <= MAX_PEEK_MESSAGES:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_PEEK_MESSAGES}")
    return count


def run(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    commands: dict[str, Callable[[StackClients, argparse.Namespace, Output, TextIO], int]] = {
        "list": _list, "describe": _describe, "stats": _stats, "peek": _peek, "purge": _purge,
        "redrive": _redrive, "delete": _delete,
    }
    return commands[args.action](clients, args, output, stdin)


def queue_url(clients: StackClients, queue: str) -> str:
    """The URL of ``queue``, a name of the admin key's account or already a URL."""
    if "://" in queue:
        return queue
    return str(clients.sqs.get_queue_url(QueueName=queue)["QueueUrl"])


def _name(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def _list(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    urls: list[str] = []
    for page in clients.sqs.get_paginator("list_queues").paginate(QueueNamePrefix=args.prefix,
                                                                  PaginationConfig={"PageSize": 1000}):
        urls.extend(page.get("QueueUrls", []))
    queues = [{"Name": _name(u), "Type": "fifo" if u.endswith(".fifo") else "standard", "QueueUrl": u} for u in urls]
    output.table({"Queues": queues}, ("NAME", "TYPE", "URL"), [tuple(q.values()) for q in queues], empty="no queues")
    return 0


def _describe(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    url = queue_url(clients, args.queue)
    attributes = clients.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]).get("Attributes", {})
    tags = clients.sqs.list_queue_tags(QueueUrl=url).get("Tags", {})
    pairs = [("QueueUrl", url), *sorted(attributes.items()), *((f"tag:{k}", v) for k, v in sorted(tags.items()))]
    output.fields({"QueueUrl": url, "Attributes": attributes, "Tags": tags}, pairs, title=_name(url))
    return 0


def _age(seconds: int | None) -> str | None:
    return None if seconds is None else str(datetime.timedelta(seconds=seconds))


def _stats(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    stats = clients.ferrymq.get_queue_statistics(QueueUrl=queue_url(clients, args.queue))
    stats.pop("ResponseMetadata", None)
    rows = [(s["Shard"], s["Partition"], s["Visible"], s["InFlight"], s["Delayed"],
             _age(s.get("OldestMessageAgeSeconds"))) for s in stats["Shards"]]
    rows.append(("all", "-", stats["Visible"], stats["InFlight"], stats["Delayed"],
                 _age(stats.get("OldestMessageAgeSeconds"))))
    output.table(stats, ("SHARD", "PARTITION", "VISIBLE", "IN FLIGHT", "DELAYED", "OLDEST"), rows,
                 title=_name(stats["QueueUrl"]))
    return 0


def _peek(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    messages = clients.ferrymq.peek_messages(QueueUrl=queue_url(clients, args.queue),
                                             MaxNumberOfMessages=args.max)["Messages"]

    def body(text: str) -> str:
        flat = " ".join(text.split())
        return flat if len(flat) <= BODY_COLUMN else flat[: BODY_COLUMN - 1] + "…"

    rows = [(m["MessageId"], utc(m["SentTimestamp"] / 1000), m["ReceiveCount"], m.get("MessageGroupId"),
             body(m["Body"])) for m in messages]
    output.table({"Messages": messages}, ("MESSAGE ID", "SENT", "RECEIVES", "GROUP", "BODY"), rows,
                 empty="no visible messages")
    return 0


def _total(stats: dict) -> int:
    return int(stats["Visible"] + stats["InFlight"] + stats["Delayed"])


def _purge(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    url = queue_url(clients, args.queue)
    before = _total(clients.ferrymq.get_queue_statistics(QueueUrl=url))
    messages = counted(before, "message")
    if not args.yes and not confirmed(f"purge queue {_name(url)}, deleting its {messages}?",
                                      f"purging {_name(url)} deletes its {messages}", stdin, output.err):
        return 1
    clients.sqs.purge_queue(QueueUrl=url)
    left, steady = before, 0
    with output.progress() as progress:
        task = progress.add_task(f"purging {_name(url)}", total=max(before, 1))
        while left and steady < PURGE_STEADY_POLLS:
            time.sleep(POLL_SECONDS)
            now = _total(clients.ferrymq.get_queue_statistics(QueueUrl=url))
            steady = steady + 1 if now >= left else 0
            left = now
            progress.update(task, completed=max(before - left, 0))
        progress.update(task, completed=max(before, 1) if not left else max(before - left, 0))
    output.table({"QueueUrl": url, "Purged": max(before - left, 0), "Left": left},
                 ("QUEUE", "PURGED", "LEFT (sent since)"), [(_name(url), max(before - left, 0), left)])
    return 0


def _arn(clients: StackClients, url: str) -> str:
    return str(clients.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])


def _redrive(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    source = _arn(clients, queue_url(clients, args.queue))
    request: dict[str, Any] = {"SourceArn": source}
    if args.to:
        request["DestinationArn"] = _arn(clients, queue_url(clients, args.to))
    if args.max_per_second is not None:
        request["MaxNumberOfMessagesPerSecond"] = args.max_per_second
    handle = clients.sqs.start_message_move_task(**request)["TaskHandle"]
    with output.progress() as progress:
        task = progress.add_task(f"redriving {source.rsplit(':', 1)[-1]}", total=None)
        while True:
            current = _task(clients, source, handle)
            moved, to_move = current.get("ApproximateNumberOfMessagesMoved", 0), current.get(
                "ApproximateNumberOfMessagesToMove")
            progress.update(task, completed=moved, total=to_move)
            if current["Status"] in REDRIVE_DONE:
                break
            time.sleep(POLL_SECONDS)
    output.table(current, ("SOURCE", "DESTINATION", "STATUS", "MOVED", "TO MOVE"),
                 [(source, current.get("DestinationArn", "(their sources)"), current["Status"], moved, to_move)])
    return 0 if current["Status"] == "COMPLETED" else 1


def _task(clients: StackClients, source: str, handle: str) -> dict[str, Any]:
    """The move task ``handle`` of ``source``: SQS names the handle of a running task only, and lists the most
    recent first, so a finished one is the first listed."""
    results = clients.sqs.list_message_move_tasks(SourceArn=source)["Results"]
    return next((t for t in results if t.get("TaskHandle") == handle), results[0] if results else {"Status": "FAILED"})


def _delete(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    url = queue_url(clients, args.queue)
    if not args.yes and not confirmed(f"delete queue {_name(url)} and every message in it?",
                                      f"deleting {_name(url)} removes it and its messages", stdin, output.err):
        return 1
    clients.sqs.delete_queue(QueueUrl=url)
    output.table({"QueueUrl": url, "Deleted": True}, ("DELETED",), [(url,)])
    return 0
