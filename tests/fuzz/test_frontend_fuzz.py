"""The running front end fuzzed over HTTP, on both protocols, with SigV4-signed requests: whatever the request,
the answer is never a 5xx, and every refusal is an SQS error in the request's protocol."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.answers import check_answer
from tests.fuzz.conftest import FuzzQueues, SignedClient
from tests.fuzz.profiles import fuzz_settings
from tests.fuzz.strategies import (
    NESTED_INPUT_ACTIONS,
    JsonRequest,
    QueryRequest,
    json_request_strategy,
    query_requests,
)

_LONG_POLLS = {str(seconds) for seconds in range(1, 21)}


def _without_long_poll(request: QueryRequest) -> list[tuple[str, str]]:
    """The pairs with any long poll turned into a short one (a 20 s wait per case would blow the time budget);
    odd WaitTimeSeconds values are kept, since refusing them is what is under test."""
    if request.action != "ReceiveMessage":
        return request.pairs
    pairs = [(name, "0" if name == "WaitTimeSeconds" and value.strip() in _LONG_POLLS else value)
             for name, value in request.pairs]
    if not any(name == "WaitTimeSeconds" for name, _ in pairs):
        pairs.append(("WaitTimeSeconds", "0"))  # the queue's ReceiveMessageWaitTimeSeconds may be set by now
    return pairs


def _json_without_long_poll(request: JsonRequest) -> bytes:
    if request.action != "ReceiveMessage":
        return request.body
    try:
        document = json.loads(request.body)
    except (ValueError, RecursionError):
        # Not JSON, or nested deeper than Python's parser goes (the server's bounded decoder refuses it too):
        # refused before any wait.
        return request.body
    if not isinstance(document, dict):
        return request.body
    wait = document.get("WaitTimeSeconds")
    if wait is None or (isinstance(wait, int | float) and not isinstance(wait, bool) and 0 < wait <= 20):
        document["WaitTimeSeconds"] = 0
    return json.dumps(document).encode()


@fuzz_settings(150)
@given(data=st.data())
def test_query_protocol_answers_every_request_with_a_result_or_an_sqs_error(
    signed: SignedClient, fuzz_queues: FuzzQueues, data: st.DataObject
) -> None:
    # given any query-protocol request, sent as a signed form POST to the root or to a queue's path
    request = data.draw(st.one_of(query_requests(fuzz_queues.known),
                                  query_requests(fuzz_queues.known, NESTED_INPUT_ACTIONS)))
    path = data.draw(st.sampled_from(["/", "/000000000000/fuzz-standard", "/000000000000/no-such-queue"]))
    # when the front end answers it
    answer = signed.form(urlencode(_without_long_poll(request)).encode(), path)
    # then it is no 5xx, and a refusal is an ErrorResponse document
    check_answer("query", answer.status, answer.headers, answer.body, (path, request))


@fuzz_settings(150)
@given(data=st.data())
def test_json_protocol_answers_every_request_with_a_result_or_an_sqs_error(
    signed: SignedClient, fuzz_queues: FuzzQueues, data: st.DataObject
) -> None:
    # given any JSON-protocol request, signed
    request = data.draw(st.one_of(json_request_strategy(fuzz_queues.known),
                                  json_request_strategy(fuzz_queues.known, NESTED_INPUT_ACTIONS)))
    # when the front end answers it
    answer = signed.json(request.action, _json_without_long_poll(request))
    # then it is no 5xx, and a refusal carries __type, message and the x-amzn-query-error header
    check_answer("json", answer.status, answer.headers, answer.body, request)
