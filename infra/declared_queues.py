"""Queues declared at start-up: ``ferrymq up --queues queues.yaml`` (or ``FERRYMQ_QUEUES_FILE``), as ElasticMQ's
configuration file declares them.

The file::

    queues:
      jobs-dlq: {}
      jobs:
        attributes:            # any settable SQS attribute; numbers and booleans may be written bare
          VisibilityTimeout: 60
        deadLetterQueue:       # becomes RedrivePolicy; the target is declared in the same file
          name: jobs-dlq
          maxReceiveCount: 3
        tags:
          team: billing
      orders.fifo: {}          # a name ending in .fifo is a FIFO queue (FifoQueue: true is implied)

:func:`load` reads and checks the whole file before ``up`` starts anything, with the front end's own checks
(queue names, attribute values, tags, redrive policies), so a bad entry is refused in one line naming it, with
the error SQS would give. :func:`apply` runs once the stack serves, through the SQS API with the admin key, in
the home region and the admin key's account: a missing queue is created, an existing one gets the declared
attributes and tags that differ (attributes and tags not declared are left as they are), so applying a file
twice changes nothing the second time. Dead-letter targets are created before the queues that name them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from botocore.exceptions import ClientError

from ferrymq.arn import queue_arn
from ferrymq.destinations import FIFO_SUFFIX
from ferrymq.errors import SqsError
from ferrymq.metadata import queue_attributes
from ferrymq.metadata.catalog import check_queue_name
from ferrymq.metadata.redrive import check_redrive_policy
from ferrymq.metadata.tags import check_tags

_ENTRY_KEYS = ("attributes", "deadLetterQueue", "tags")
_DLQ_KEYS = ("name", "maxReceiveCount")


class QueuesFileError(ValueError):
    """The queues file, or one of its entries, cannot be applied; the message is one line naming it."""


@dataclass(frozen=True)
class DeclaredQueue:
    """One entry: its name, its checked attributes (RedrivePolicy included) and tags."""

    name: str
    attributes: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    dead_letter_target: str | None = None


@dataclass(frozen=True)
class Applied:
    """What :func:`apply` did, queue names by outcome."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{len(names)} {what}" for what, names in (("created", self.created), ("updated", self.updated),
                                                            ("unchanged", self.unchanged)) if names]
        return ", ".join(parts) or "none declared"


def load(path: Path, *, region: str, account: str) -> list[DeclaredQueue]:
    """The queues ``path`` declares, in the order they are to be made (dead-letter targets first)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise QueuesFileError(f"queues file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise QueuesFileError(f"queues file {path}: not UTF-8 text") from None
    return parse(text, path, region=region, account=account)


def parse(text: str, path: Path, *, region: str, account: str) -> list[DeclaredQueue]:
    """:func:`load` of ``text``, read from ``path``."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not YAML"
        raise QueuesFileError(f"queues file {path}: not valid YAML{where}: {problem}") from None
    if not isinstance(document, dict) or set(document) != {"queues"} or not isinstance(document["queues"], dict):
        raise QueuesFileError(f"queues file {path}: expected one key, queues, holding a map of queue names")
    declared = [_entry(path, name, body, region, account) for name, body in document["queues"].items()]
    return _ordered(path, declared)


def _entry(path: Path, name: Any, body: Any, region: str, account: str) -> DeclaredQueue:
    where = f"queues file {path}: queue {name!r}"
    if not isinstance(name, str):
        raise QueuesFileError(f"{where}: a queue name is text")
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise QueuesFileError(f"{where}: expected a map of {', '.join(_ENTRY_KEYS)}")
    unknown = sorted(str(k) for k in body if k not in _ENTRY_KEYS)
    if unknown:
        raise QueuesFileError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(_ENTRY_KEYS)})")
    raw = _text_map(where, "attributes", body.get("attributes"))
    if name.endswith(FIFO_SUFFIX):
        raw.setdefault("FifoQueue", "true")
    fifo = raw.get("FifoQueue", "").lower() == "true"
    target = None
    try:
        check_queue_name(name, fifo=fifo)
        if body.get("deadLetterQueue") is not None:
            if "RedrivePolicy" in raw:
                raise QueuesFileError(f"{where}: give deadLetterQueue or attributes.RedrivePolicy, not both")
            target, count = _dead_letter(where, body["deadLetterQueue"])
            raw["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": queue_arn(region, account, target),
                                               "maxReceiveCount": count})
        attributes = queue_attributes.check_settable(raw, fifo=fifo)
        queue_attributes.combined({}, attributes, fifo=fifo)
        if "RedrivePolicy" in attributes and target is None and attributes["RedrivePolicy"]:
            target = check_redrive_policy(attributes["RedrivePolicy"]).dead_letter_target_arn.rsplit(":", 1)[-1]
        tags = check_tags(_text_map(where, "tags", body.get("tags")), name, required=False)
    except SqsError as exc:
        raise QueuesFileError(f"{where}: {exc.query_code}: {' '.join(exc.message.split())}") from None
    return DeclaredQueue(name, attributes, tags, target)


def _dead_letter(where: str, value: Any) -> tuple[str, Any]:
    if not isinstance(value, dict) or set(value) != set(_DLQ_KEYS):
        raise QueuesFileError(f"{where}: deadLetterQueue needs exactly name and maxReceiveCount")
    if not isinstance(value["name"], str):
        raise QueuesFileError(f"{where}: deadLetterQueue's name is a queue name")
    return value["name"], value["maxReceiveCount"]


def _text_map(where: str, key: str, value: Any) -> dict[str, str]:
    """A map of strings as SQS takes it: ``true``/``false`` for booleans, numbers as written."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise QueuesFileError(f"{where}: {key} is a map of names to values")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or isinstance(v, dict | list) or v is None:
            raise QueuesFileError(f"{where}: {key}.{k}: expected a name and a plain value")
        out[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


def _ordered(path: Path, declared: list[DeclaredQueue]) -> list[DeclaredQueue]:
    """Targets before the queues that name them; a target must be declared, be of the same type, and not lead
    back round to the queue."""
    by_name = {q.name: q for q in declared}
    for queue in declared:
        target = queue.dead_letter_target
        if target is None:
            continue
        where = f"queues file {path}: queue {queue.name!r}"
        if target not in by_name:
            raise QueuesFileError(f"{where}: its dead-letter queue {target!r} is not declared in the file")
        if target.endswith(FIFO_SUFFIX) != queue.name.endswith(FIFO_SUFFIX):
            raise QueuesFileError(f"{where}: InvalidAttributeName: Value {queue.attributes['RedrivePolicy']} for "
                                  "parameter RedrivePolicy is invalid. Reason: Dead-letter queue must be same type "
                                  "of queue as the source..")
    out: list[DeclaredQueue] = []
    placed: set[str] = set()
    for queue in declared:
        chain: list[DeclaredQueue] = []
        current: DeclaredQueue | None = queue
        while current is not None and current.name not in placed:
            if current in chain:
                raise QueuesFileError(f"queues file {path}: queue {current.name!r}: its dead-letter queues lead "
                                      "back to it")
            chain.append(current)
            current = by_name.get(current.dead_letter_target) if current.dead_letter_target else None
        for item in reversed(chain):
            out.append(item)
            placed.add(item.name)
    return out


def apply(sqs: Any, declared: list[DeclaredQueue]) -> Applied:
    """Create or update ``declared`` through ``sqs`` (a client signing with the admin key)."""
    applied = Applied()
    for queue in declared:
        try:
            outcome = _apply_one(sqs, queue)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = error.get("QueryErrorCode") or error.get("Code", "Error")
            message = " ".join(str(error.get("Message", exc)).split())
            raise QueuesFileError(f"queue {queue.name!r}: {code}: {message}") from None
        getattr(applied, outcome).append(queue.name)
    return applied


def _apply_one(sqs: Any, queue: DeclaredQueue) -> str:
    try:
        url = sqs.get_queue_url(QueueName=queue.name)["QueueUrl"]
    except sqs.exceptions.QueueDoesNotExist:
        request: dict[str, Any] = {"QueueName": queue.name, "Attributes": queue.attributes}
        if queue.tags:
            request["tags"] = queue.tags
        sqs.create_queue(**request)
        return "created"
    current = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]).get("Attributes", {})
    changed = {k: v for k, v in queue.attributes.items() if k != "FifoQueue" and not _same(k, current.get(k), v)}
    if changed:
        sqs.set_queue_attributes(QueueUrl=url, Attributes=changed)
    tags = sqs.list_queue_tags(QueueUrl=url).get("Tags", {})
    retag = {k: v for k, v in queue.tags.items() if tags.get(k) != v}
    if retag:
        sqs.tag_queue(QueueUrl=url, Tags=retag)
    return "updated" if changed or retag else "unchanged"


def _same(name: str, current: str | None, wanted: str) -> bool:
    if current is None:
        return wanted == "" or (name in (queue_attributes.SHARD_COUNT, queue_attributes.PRIORITY_LEVELS)
                                and wanted == "1")
    if current == wanted:
        return True
    # JSON documents (RedrivePolicy writes maxReceiveCount as a number or a string) compare by content.
    try:
        return _normal(json.loads(current)) == _normal(json.loads(wanted))
    except ValueError:
        return False


def _normal(document: Any) -> Any:
    if isinstance(document, dict):
        return {k: _normal(v) for k, v in document.items()}
    if isinstance(document, list):
        return [_normal(v) for v in document]
    return str(document)
