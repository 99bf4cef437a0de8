"""Hypothesis strategies for SQS requests as a careless client or an attacker could send them, in either protocol.

Requests are drawn from the service model, so every action and every parameter name is reachable, and then
bent: list indexes in other scripts or thousands of digits long, sub-parameters under scalars, values that are
huge numbers, deeply nested JSON, base64 or not, empty, control characters, the same parameter twice, and the
wrong JSON type for a member.  :class:`Known` supplies real values (queue URLs, receipt handles) so a share of
the requests gets past the queue lookup and reaches the validators behind it.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from ferrymq.metadata import queue_attributes
from ferrymq.protocol.model import BLOB, BOOLEAN, INTEGER, LIST, LONG, MAP, OPERATIONS, STRING, STRUCTURE, Shape

ACTIONS = sorted(OPERATIONS)
# More digits than Python turns into an int by default (4,300).
HUGE_DIGITS = "1" * 4301
# Stands in a JSON document for a number literal json.dumps cannot write (it would need int(HUGE_DIGITS)).
_BIG_NUMBER_MARK = "__fuzz_big_number__"


@dataclass(frozen=True)
class Known:
    """Real values worth sending: the more requests name a real queue, the deeper they get."""

    queue_urls: Sequence[str] = ("http://localhost:9324/000000000000/fuzz",)
    queue_arns: Sequence[str] = ("arn:aws:sqs:us-east-1:000000000000:fuzz",)
    receipt_handles: Sequence[str] = ()
    # Queue URLs a generated DeleteQueue may not name, so the fuzzing keeps its queues.
    protected_urls: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class QueryRequest:
    action: str
    pairs: list[tuple[str, str]]
    path: str = "/"


@dataclass(frozen=True)
class JsonRequest:
    action: str
    body: bytes


# --- values ---------------------------------------------------------------------------------------------


def mostly(usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any], one_in: int) -> st.SearchStrategy[Any]:
    """``rare`` about once in ``one_in`` draws, else ``usual`` (``one_of`` would pick each half the time)."""
    return st.integers(0, one_in - 1).flatmap(lambda roll: rare if roll == 0 else usual)


_ODD_INDEXES = ["0", "01", "-1", "", "x", "1.5", "\u00b2", "\u0663", "\uff11", HUGE_DIGITS, "9" * 25]
indexes = st.one_of(
    st.sampled_from(["1", "2"]), st.sampled_from(["1", "2", "3", "10"]), st.sampled_from(_ODD_INDEXES)
)

_ODD_NUMBERS = ["+5", " 5", "5 ", "1_000", "\u0663", "\u00b2", "1e3", "0x10", "5.0", "", "-0", "0" * 30 + "7"]
numbers_as_text = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.integers(0, 50).map(str),
    st.sampled_from([19, 20, 40, 4300, 4301, 5000]).map(lambda n: "1" * n),
    st.sampled_from(_ODD_NUMBERS),
)

_DEPTHS = st.sampled_from([2, 6, 31, 32, 33, 100, 999, 1000, 1024, 1025, 3000, 5000])
nested_json = _DEPTHS.flatmap(
    lambda depth: st.sampled_from(
        [
            "[" * depth + "]" * depth,
            '{"a":' * depth + "1" + "}" * depth,
            '{"Statement":' + "[" * depth + "]" * depth + "}",
            '{"maxReceiveCount":' + "[" * depth + "]" * depth + ',"deadLetterTargetArn":"x"}',
        ]
    )
)

_json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    _json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)
json_text = json_values.map(json.dumps)

_SAMPLE_ARNS = [
    "arn:aws:sqs:us-east-1:000000000000:fuzz-dlq",
    "arn:aws:sqs:us-east-1:111111111111:other",
    "arn:aws:sns:us-east-1:000000000000:topic",
    "arn:aws:sqs:us-east-1:0000:short",
    "arn:aws:sqs:us-east-1:\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660:digits",
    "arn",
    "",
]
_RECEIVE_COUNTS = ["5", '"5"', "1000", "1001", "0", HUGE_DIGITS, f'"{HUGE_DIGITS}"', "[[[1]]]", "5.0", "true",
                   "null", "-1", "1e400", "1e30", '"+5"', '"\u0663"', '" 7 "', "{}"]


@functools.cache
def arns(known: Known) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from([*known.queue_arns, *_SAMPLE_ARNS]), st.text(max_size=20))


@functools.cache
def redrive_policies(known: Known) -> st.SearchStrategy[str]:
    return st.builds(
        lambda count, arn: f'{{"maxReceiveCount":{count},"deadLetterTargetArn":{json.dumps(arn)}}}',
        st.sampled_from(_RECEIVE_COUNTS), arns(known),
    )


@functools.cache
def redrive_allow_policies(known: Known) -> st.SearchStrategy[str]:
    return st.builds(
        lambda permission, sources: json.dumps({"redrivePermission": permission, "sourceQueueArns": sources}),
        st.sampled_from(["allowAll", "denyAll", "byQueue", "bogus", ""]),
        st.one_of(st.lists(arns(known), max_size=12), json_values),
    )


@functools.cache
def policies(known: Known) -> st.SearchStrategy[str]:
    statement = st.fixed_dictionaries(
        {"Effect": st.sampled_from(["Allow", "Deny", "Maybe"])},
        optional={
            "Sid": st.text(max_size=6),
            "Principal": st.one_of(st.just("*"), st.fixed_dictionaries({"AWS": st.sampled_from(
                ["*", "111111111111", "arn:aws:iam::111111111111:root", "\u0661" * 12])}), json_values),
            "Action": st.one_of(st.sampled_from(["SQS:*", "sqs:SendMessage", "*", "bogus"]), json_values),
            "Resource": st.one_of(arns(known), st.just("*")),
            "Condition": st.one_of(json_values, st.just({"StringEquals": {"aws:SourceArn": "x"}})),
        },
    )
    document = st.fixed_dictionaries(
        {"Statement": st.one_of(st.lists(statement, max_size=3), statement, json_values)},
        optional={"Version": st.sampled_from(["2012-10-17", "2008-10-17", "1999-01-01"]), "Id": json_values},
    )
    return document.map(json.dumps)


_b64 = st.binary(max_size=24).map(lambda raw: base64.b64encode(raw).decode())
base64_values = st.one_of(_b64, st.text(max_size=8), st.sampled_from(["\u00e9", "AA==", "A", "====", "QQ", "QQ=="]))

task_handles = st.one_of(
    st.one_of(json_text, nested_json, st.text(max_size=20)).map(lambda text: base64.b64encode(text.encode()).decode()),
    st.builds(lambda task, arn: base64.b64encode(json.dumps({"taskId": task, "sourceArn": arn}).encode()).decode(),
              json_values, st.sampled_from(_SAMPLE_ARNS)),
    base64_values,
)

_DATA_TYPES = ["String", "Number", "Binary", "String.x", "Number.int", "Binary.png", "Foo", "", "String.", "Number "]
_NAME_HINTS = frozenset({"Name", "Key", "AttributeName", "AttributeNames", "MessageAttributeName",
                         "MessageSystemAttributeName", "TagKey"})
_MESSAGE_ATTRIBUTE_NAMES = ["a", "b.c", ".a", "a..b", "AWS.x", "amazon.y", "\u00e9t\u00e9", "x" * 257, "a b"]


@functools.cache
def texts() -> st.SearchStrategy[str]:
    return st.one_of(st.text(max_size=30), st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=30))


@functools.cache
def any_value(known: Known) -> st.SearchStrategy[str]:
    """Any string a parameter could carry."""
    return st.one_of(
        texts(), numbers_as_text, nested_json, json_text, redrive_policies(known), policies(known),
        base64_values, st.sampled_from(list(known.queue_urls)),
    )


@functools.cache
def value_for(kind: str, hint: str, known: Known) -> st.SearchStrategy[str]:
    """A value for a parameter of ``kind`` whose name ends in ``hint``: mostly plausible, sometimes anything."""
    plausible: st.SearchStrategy[str]
    if kind in (INTEGER, LONG):
        plausible = numbers_as_text
    elif kind == BOOLEAN:
        plausible = st.sampled_from(["true", "false", "TRUE", "yes", "1", ""])
    elif kind == BLOB:
        plausible = base64_values
    elif hint in ("QueueUrl",):
        plausible = st.sampled_from(list(known.queue_urls))
    elif hint in _NAME_HINTS:
        plausible = st.sampled_from([*sorted(queue_attributes.ALL), "All", "bogus", *_MESSAGE_ATTRIBUTE_NAMES])
    elif hint == "Value":
        plausible = st.one_of(numbers_as_text, nested_json, redrive_policies(known), redrive_allow_policies(known),
                              policies(known), st.sampled_from(["true", "false", "queue", "perMessageGroupId"]))
    elif hint == "TaskHandle":
        plausible = task_handles
    elif hint.endswith("Arn"):
        plausible = arns(known)
    elif hint == "ReceiptHandle" and known.receipt_handles:
        plausible = st.one_of(st.sampled_from(list(known.receipt_handles)), base64_values)
    elif hint == "DataType":
        plausible = st.sampled_from(_DATA_TYPES)
    elif hint == "Id":
        plausible = st.sampled_from(["a", "b", "a", "x" * 81, "a b", ""])
    elif hint in ("StringValue", "MessageBody"):
        plausible = st.one_of(texts(), numbers_as_text)
    else:
        plausible = texts()
    return mostly(plausible, any_value(known), 4)


# --- query protocol -------------------------------------------------------------------------------------

_INDEX = object()  # where a list index goes in a parameter name template


@dataclass(frozen=True)
class _Template:
    parts: tuple[Any, ...]
    kind: str
    hint: str


def _templates(shape: Shape) -> list[_Template]:
    out: list[_Template] = []

    def walk(current: Shape, flattened: bool, path: tuple[Any, ...], hint: str) -> None:
        kind = current.kind
        if kind == STRUCTURE:
            for member in current.by_query_name.values():
                walk(member.shape, member.flattened, (*path, member.query_name), member.query_name)
        elif kind == LIST:
            assert current.element is not None
            base = path if flattened else (*path, current.element_name)
            out.append(_Template(path, STRING, hint))  # the bare form: "AttributeName=All" or "AttributeNames="
            walk(current.element, False, (*base, _INDEX), hint)
        elif kind == MAP:
            assert current.value is not None
            base = path if flattened else (*path, "entry")
            out.append(_Template((*base, _INDEX, current.key_name), STRING, current.key_name))
            walk(current.value, False, (*base, _INDEX, current.value_name), current.value_name)
        else:
            out.append(_Template(path, kind, hint))

    walk(shape, False, (), "")
    return out


_QUERY_TEMPLATES = {name: _templates(operation.input) for name, operation in OPERATIONS.items()}
_JUNK_NAMES = st.sampled_from(["Bogus", "Attribute.1.x", "AWSAccountId.1.x", "Version", "Action", "QueueUrl.1",
                               "MessageAttribute.1.Value.x", "Signature", "a.b.c.d.e"])


_actions = mostly(st.sampled_from(ACTIONS), st.sampled_from(["", "Bogus", "sendmessage"]), 12)


# The actions whose input nests (message attributes, batch entries, attribute maps holding JSON documents,
# account lists): where the parsers and validators have the most to get wrong.
NESTED_INPUT_ACTIONS = ("SendMessage", "SendMessageBatch", "CreateQueue", "SetQueueAttributes", "AddPermission",
                        "ChangeMessageVisibilityBatch", "DeleteMessageBatch", "TagQueue", "GetQueueAttributes",
                        "ReceiveMessage", "StartMessageMoveTask", "CancelMessageMoveTask")


@st.composite
def query_requests(draw: st.DrawFn, known: Known, actions: Sequence[str] | None = None) -> QueryRequest:
    action = draw(_actions if actions is None else st.sampled_from(actions))
    templates = _QUERY_TEMPLATES.get(action, [])
    pairs: list[tuple[str, str]] = [("Action", action)]
    if draw(st.booleans()):
        pairs.append(("Version", "2012-11-05"))
    urls = [url for url in known.queue_urls if action != "DeleteQueue" or url not in known.protected_urls]
    if any(t.parts == ("QueueUrl",) for t in templates) and urls and draw(st.integers(0, 9)) < 8:
        pairs.append(("QueueUrl", draw(st.sampled_from(urls))))
    for _ in range(draw(st.integers(0, 8))):
        if templates and draw(st.integers(0, 9)) < 8:
            template = draw(st.sampled_from(templates))
            name = ".".join(draw(indexes) if part is _INDEX else part for part in template.parts)
            value = draw(value_for(template.kind, template.hint, known))
        else:
            name = draw(st.one_of(_JUNK_NAMES, st.text(max_size=12)))
            value = draw(any_value(known))
        if draw(st.integers(0, 19)) == 0:
            name += "." + draw(st.sampled_from(["x", "1", "Name", "Value", "\u00b2"]))
        if action == "DeleteQueue" and name == "QueueUrl" and value in known.protected_urls:
            continue
        pairs.append((name, value))
    if pairs and draw(st.integers(0, 19)) == 0:
        pairs.append(draw(st.sampled_from(pairs)))  # a parameter sent twice
    return QueryRequest(action, pairs)


# --- AWS JSON 1.0 ---------------------------------------------------------------------------------------


class _JsonDocuments:
    """Strategies for a JSON input of each shape, cached per shape and member name."""

    def __init__(self, known: Known) -> None:
        self._known = known
        self._cache: dict[tuple[str, str], st.SearchStrategy[Any]] = {}

    def of(self, shape: Shape, hint: str = "") -> st.SearchStrategy[Any]:
        key = (shape.name, hint)
        if key not in self._cache:
            self._cache[key] = self._build(shape, hint)
        return self._cache[key]

    def _build(self, shape: Shape, hint: str) -> st.SearchStrategy[Any]:
        kind = shape.kind
        right: st.SearchStrategy[Any]
        if kind == STRUCTURE:
            right = st.fixed_dictionaries(
                {}, optional={name: self.of(member.shape, name) for name, member in shape.members.items()}
            )
        elif kind == LIST:
            assert shape.element is not None
            right = st.lists(self.of(shape.element, hint), max_size=4)
        elif kind == MAP:
            assert shape.key is not None and shape.value is not None
            # JSON object keys are strings whatever the model says.
            right = st.dictionaries(value_for(STRING, "Name", self._known), self.of(shape.value, "Value"), max_size=4)
        elif kind in (INTEGER, LONG):
            right = st.one_of(st.integers(-(2**70), 2**70), st.integers(0, 50), st.just(_BIG_NUMBER_MARK),
                              st.floats(allow_nan=False, allow_infinity=False))
        elif kind == BOOLEAN:
            right = st.booleans()
        elif kind == BLOB:
            right = base64_values
        else:
            assert kind == STRING
            right = value_for(STRING, hint, self._known)
        return mostly(right, json_values, 8)


@st.composite
def json_requests(draw: st.DrawFn, known: Known, documents: _JsonDocuments | None = None,
                  actions: Sequence[str] | None = None) -> JsonRequest:
    action = draw(_actions if actions is None else st.sampled_from(actions))
    operation = OPERATIONS.get(action)
    shape = operation.input if operation is not None else OPERATIONS["SendMessage"].input
    document = draw((documents or _JsonDocuments(known)).of(shape))
    urls = [url for url in known.queue_urls if action != "DeleteQueue" or url not in known.protected_urls]
    if isinstance(document, dict) and "QueueUrl" in shape.members and urls and draw(st.integers(0, 9)) < 8:
        document["QueueUrl"] = draw(st.sampled_from(urls))
    # A QueueUrl drawn as a list or an object (not hashable) names no queue, protected or not.
    queue_url = document.get("QueueUrl") if isinstance(document, dict) else None
    if action == "DeleteQueue" and isinstance(queue_url, str) and queue_url in known.protected_urls:
        del document["QueueUrl"]
    roll = draw(st.integers(0, 39))
    if roll == 0:
        body = draw(st.binary(max_size=40))
    elif roll == 1:
        body = draw(nested_json).encode()
    else:
        body = json.dumps(document).replace(f'"{_BIG_NUMBER_MARK}"', HUGE_DIGITS).encode()
    return JsonRequest(action, body)


def json_request_strategy(known: Known, actions: Sequence[str] | None = None) -> st.SearchStrategy[JsonRequest]:
    return json_requests(known, _JsonDocuments(known), actions)
