"""``ferrymq push create|list|describe|disable|enable|rotate-secret|delete``: event-source mappings (push delivery)
through the running front end, with the admin key (:mod:`ferrymq.infra.stack_client`). A queue is named by its
name (the admin key's account) or its URL; a mapping by its UUID. ``create`` and ``rotate-secret`` print the HTTP
signing secret, the one time it is shown."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, TextIO

from ferrymq.infra.cli_output import Output, confirmed
from ferrymq.infra.cli_queues import queue_url
from ferrymq.infra.stack_client import StackClients


def add_parsers(commands: Any) -> None:
    push = commands.add_parser("push", help="event-source mappings: create, list, describe, disable, enable, "
                                            "rotate-secret, delete")
    actions = push.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, text: str, *, mapping: bool = True) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=text, description=text)
        if mapping:
            parser.add_argument("uuid", metavar="UUID", help="the mapping's UUID")
        parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
        return parser

    create = action("create", "deliver a queue's messages to an HTTP endpoint or a Lambda function", mapping=False)
    create.add_argument("--queue", required=True, metavar="QUEUE", help="a queue name (the admin key's account) or URL")
    target = create.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="POST batches to this http(s) URL, signed")
    target.add_argument("--function", metavar="ARN", help="invoke this Lambda function (name or ARN)")
    create.add_argument("--batch-size", type=int, metavar="N", help="most records per batch (default 10)")
    create.add_argument("--window", type=int, metavar="S", help="seconds a batch may gather records (0 to 300)")
    create.add_argument("--report-failures", action="store_true",
                        help="the target answers ReportBatchItemFailures: only the items it lists stay")
    create.add_argument("--max-concurrency", type=int, metavar="N", help="most batches in flight at once (2 to 1000)")
    create.add_argument("--filter", action="append", metavar="JSON", help="a filter pattern (Lambda's syntax); "
                                                                          "repeat for several")
    create.add_argument("--disabled", action="store_true", help="create it disabled")
    action("list", "mappings of the admin key's account", mapping=False).add_argument(
        "--queue", metavar="QUEUE", help="only this queue's")
    action("describe", "a mapping's configuration and state")
    action("disable", "stop a mapping's deliveries (messages stay in the queue)")
    action("enable", "start a mapping's deliveries again")
    action("rotate-secret", "a new signing secret for a mapping with a URL, printed this once")
    action("delete", "remove a mapping").add_argument("--yes", action="store_true",
                                                      help="do not ask for confirmation")


def run(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    commands: dict[str, Callable[[StackClients, argparse.Namespace, Output, TextIO], int]] = {
        "create": _create, "list": _list, "describe": _describe, "disable": _disable, "enable": _enable,
        "rotate-secret": _rotate, "delete": _delete,
    }
    return commands[args.action](clients, args, output, stdin)


def _arn(clients: StackClients, queue: str) -> str:
    url = queue_url(clients, queue)
    return str(clients.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])


def _target(m: dict[str, Any]) -> str:
    return str(m.get("FunctionArn") or m.get("Destination", {}).get("Url", ""))


def _shown(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k != "ResponseMetadata"}


def _create(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    params: dict[str, Any] = {"EventSourceArn": _arn(clients, args.queue), "Enabled": not args.disabled}
    if args.url:
        params["Destination"] = {"Url": args.url}
    else:
        params["FunctionName"] = args.function
    for name, value in (("BatchSize", args.batch_size), ("MaximumBatchingWindowInSeconds", args.window)):
        if value is not None:
            params[name] = value
    if args.report_failures:
        params["FunctionResponseTypes"] = ["ReportBatchItemFailures"]
    if args.max_concurrency is not None:
        params["ScalingConfig"] = {"MaximumConcurrency": args.max_concurrency}
    if args.filter:
        for pattern in args.filter:
            json.loads(pattern)  # a typo is the user's to fix here, before the server words it as Lambda does
        params["FilterCriteria"] = {"Filters": [{"Pattern": p} for p in args.filter]}
    created = _shown(clients.ferrymq.create_event_source_mapping(**params))
    _fields(output, created)
    if created.get("SigningSecret"):
        output.say("The signing secret is shown this once: keep it where the receiver verifies X-FerryMQ-Signature.")
    return 0


def _fields(output: Output, m: dict[str, Any]) -> None:
    pairs = [("UUID", m["UUID"]), ("State", m["State"]), ("Queue", m["EventSourceArn"]), ("Target", _target(m)),
             ("BatchSize", m["BatchSize"]), ("Window (s)", m.get("MaximumBatchingWindowInSeconds", 0)),
             ("ReportBatchItemFailures", "ReportBatchItemFailures" in m.get("FunctionResponseTypes", [])),
             ("MaximumConcurrency", m.get("ScalingConfig", {}).get("MaximumConcurrency")),
             ("Filters", len(m.get("FilterCriteria", {}).get("Filters", []))),
             ("LastProcessingResult", m.get("LastProcessingResult")), ("LastModified", m.get("LastModified"))]
    if m.get("SigningSecret"):
        pairs.append(("SigningSecret", m["SigningSecret"]))
    output.fields(m, pairs)


def _list(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    params = {"EventSourceArn": _arn(clients, args.queue)} if args.queue else {}
    found = [m for page in clients.ferrymq.get_paginator("list_event_source_mappings").paginate(**params)
             for m in page["EventSourceMappings"]]
    output.table({"EventSourceMappings": found}, ("UUID", "STATE", "QUEUE", "TARGET", "BATCH", "LAST RESULT"),
                 [(m["UUID"], m["State"], m["EventSourceArn"].rsplit(":", 1)[-1], _target(m), m["BatchSize"],
                   m.get("LastProcessingResult")) for m in found], empty="no event-source mappings")
    return 0


def _describe(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    _fields(output, _shown(clients.ferrymq.get_event_source_mapping(UUID=args.uuid)))
    return 0


def _disable(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    _fields(output, _shown(clients.ferrymq.update_event_source_mapping(UUID=args.uuid, Enabled=False)))
    return 0


def _enable(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    _fields(output, _shown(clients.ferrymq.update_event_source_mapping(UUID=args.uuid, Enabled=True)))
    return 0


def _rotate(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    _fields(output, _shown(clients.ferrymq.rotate_event_source_mapping_secret(UUID=args.uuid)))
    output.say("The new signing secret is shown this once; pushes are signed with it within a few seconds.")
    return 0


def _delete(clients: StackClients, args: argparse.Namespace, output: Output, stdin: TextIO) -> int:
    mapping = clients.ferrymq.get_event_source_mapping(UUID=args.uuid)
    if not args.yes and not confirmed(f"Delete mapping {args.uuid} of {mapping['EventSourceArn']}?",
                                      f"mapping {args.uuid} would be deleted", stdin, output.err):
        return 1
    _fields(output, _shown(clients.ferrymq.delete_event_source_mapping(UUID=args.uuid)))
    return 0
