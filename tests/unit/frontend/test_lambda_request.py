"""How the Lambda entry reads API Gateway's proxy event: repeated headers and the caller's address."""

from __future__ import annotations

from chalice.app import Request

from ferrymq.frontend.app import to_http_request

CONTEXT = {"path": "/", "resourcePath": "/", "httpMethod": "POST"}


def event(**extra: object) -> dict[str, object]:
    return {
        "httpMethod": "POST",
        "path": "/",
        "headers": {"Host": "sqs.example", "Authorization": "second"},
        "multiValueHeaders": {"Host": ["sqs.example"], "Authorization": ["first", "second"]},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {**CONTEXT, "identity": {"sourceIp": "198.51.100.7"}},
        "body": "",
        "isBase64Encoded": False,
        **extra,
    }


def test_a_header_sent_twice_keeps_both_values_so_a_second_signature_is_refused_not_preferred() -> None:
    request = to_http_request(Request(event()))
    assert request.headers["authorization"] == "first, second"
    assert request.headers["host"] == "sqs.example"


def test_the_callers_address_is_the_one_api_gateway_saw() -> None:
    assert to_http_request(Request(event())).peer == "198.51.100.7"
    anonymous = event(requestContext=CONTEXT, multiValueHeaders=None)
    request = to_http_request(Request(anonymous))
    assert request.peer is None and request.headers["authorization"] == "second"
