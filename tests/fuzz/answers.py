"""What every answer must look like, whatever was asked: never a 5xx, and a refusal in SQS's error shape.

JSON protocol: ``application/x-amz-json-1.0`` with ``__type`` and ``message``, plus the ``x-amzn-query-error``
header (``<legacy code>;Sender``) SQS sends so that query-era SDKs can map the code.  Query protocol: an
``ErrorResponse`` document with ``Error/Type``, ``Error/Code``, ``Error/Message`` and a ``RequestId``.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from dataclasses import dataclass

from ferrymq.protocol.model import XML_NAMESPACE
from ferrymq.protocol.responses import UNKNOWN_OPERATION_BODY

_NS = {"sqs": XML_NAMESPACE}
_QUERY_ERROR_HEADER = re.compile(r"^[A-Za-z][\w.]*;Sender$")


@dataclass(frozen=True)
class SqsAnswer:
    """An error as a client reads it, for assertions on code and message."""

    status: int
    code: str  # the legacy query code: the query protocol's Code, the JSON protocol's x-amzn-query-error
    json_type: str | None  # the JSON protocol's __type
    message: str


def check_answer(protocol: str, status: int, headers: Mapping[str, str], body: bytes, context: object = "") -> None:
    """Assert the answer is no 5xx and, when a refusal, a well-formed SQS error; a success must parse."""
    assert status < 500, f"HTTP {status} for {context!r}: {body[:500]!r}"
    if status >= 400:
        read_error(protocol, status, headers, body, context)
    elif protocol == "json":
        assert isinstance(json.loads(body), dict), (context, body[:500])
    else:
        ElementTree.fromstring(body)


def read_error(protocol: str, status: int, headers: Mapping[str, str], body: bytes, context: object = "") -> SqsAnswer:
    """The error in ``body``, asserting it has SQS's shape for ``protocol``; ``headers`` keys are lower case."""
    assert 400 <= status < 500, f"HTTP {status} for {context!r}: {body[:500]!r}"
    assert headers.get("x-amzn-requestid"), (context, headers)
    if body == UNKNOWN_OPERATION_BODY:
        # SQS's bare answer to a request naming no action, XML in either protocol.
        assert status == 404 and headers.get("content-type", "").startswith("text/xml"), (context, headers)
        return SqsAnswer(status, "UnknownOperationException", None, "")
    if protocol == "json":
        assert headers.get("content-type", "").startswith("application/x-amz-json-1.0"), (context, headers)
        document = json.loads(body)
        assert isinstance(document, dict), (context, body[:500])
        assert set(document) == {"__type", "message"}, (context, document)
        json_type, message = document["__type"], document["message"]
        assert isinstance(json_type, str) and "#" in json_type, (context, document)
        assert isinstance(message, str), (context, document)
        query_error = headers.get("x-amzn-query-error", "")
        assert _QUERY_ERROR_HEADER.match(query_error), (context, headers)
        return SqsAnswer(status, query_error.split(";", 1)[0], json_type, message)
    root = ElementTree.fromstring(body)
    assert root.tag == f"{{{XML_NAMESPACE}}}ErrorResponse", (context, body[:500])
    kind = root.findtext("sqs:Error/sqs:Type", namespaces=_NS)
    code = root.findtext("sqs:Error/sqs:Code", namespaces=_NS)
    message = root.find("sqs:Error/sqs:Message", _NS)
    request_id = root.findtext("sqs:RequestId", namespaces=_NS)
    assert kind == "Sender", (context, body[:500])
    assert code, (context, body[:500])
    assert message is not None, (context, body[:500])
    assert request_id, (context, body[:500])
    return SqsAnswer(status, code, None, message.text or "")
