"""Reading API Gateway and function URL events, and writing answers back in each one's shape."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from ferrymq.frontend.lambda_events import MalformedEvent, http_request, lambda_result
from ferrymq.protocol.responses import HttpResponse


def v1(**extra: Any) -> dict[str, Any]:
    return {"httpMethod": "POST", "path": "/", "headers": {"Host": "api.example"}, "multiValueHeaders": None,
            "multiValueQueryStringParameters": None,
            "requestContext": {"path": "/Prod/", "stage": "Prod", "identity": {"sourceIp": "192.0.2.1"}},
            "body": "", "isBase64Encoded": False, **extra}


def v2(**extra: Any) -> dict[str, Any]:
    return {"version": "2.0", "rawPath": "/", "rawQueryString": "", "headers": {"host": "u.lambda-url.on.aws"},
            "requestContext": {"stage": "$default", "http": {"method": "GET", "sourceIp": "192.0.2.2"}},
            "isBase64Encoded": False, **extra}


def test_the_path_signed_keeps_the_stage_and_only_queue_urls_carry_it() -> None:
    request = http_request(v1())
    assert (request.path, request.routed_path, request.base_path) == ("/Prod/", "/", "/Prod")
    assert request.headers["host"] == "api.example"
    assert request.base_url == "https://api.example/Prod"


def test_a_custom_domain_without_a_base_path_has_none() -> None:
    event = v1(path="/000000000000/q", requestContext={"path": "/000000000000/q", "stage": "Prod"})
    assert http_request(event).base_path == ""


def test_multi_value_query_strings_keep_every_value_encoded_for_sigv4() -> None:
    event = v1(multiValueQueryStringParameters={"Action": ["ReceiveMessage"], "A b": ["x y", "z/é"]})
    assert http_request(event).query_string == "Action=ReceiveMessage&A%20b=x%20y&A%20b=z%2F%C3%A9"


def test_single_value_query_strings_serve_when_no_multi_value_map_is_given() -> None:
    assert http_request(v1(queryStringParameters={"Action": "ListQueues"})).query_string == "Action=ListQueues"


def test_a_base64_body_is_decoded() -> None:
    body = "Action=ListQueues&x=\u00e9".encode()
    event = v2(body=base64.b64encode(body).decode(), isBase64Encoded=True)
    assert http_request(event).body == body


def test_a_named_http_api_stage_is_the_base_path_and_the_raw_query_is_kept() -> None:
    event = v2(rawPath="/Prod/000000000000/q", rawQueryString="Action=ReceiveMessage&A=%2F",
               requestContext={"stage": "Prod", "http": {"method": "GET", "sourceIp": "192.0.2.3"}})
    request = http_request(event)
    assert (request.path, request.base_path, request.query_string) == ("/Prod/000000000000/q", "/Prod",
                                                                      "Action=ReceiveMessage&A=%2F")
    assert request.peer == "192.0.2.3"


def test_a_stage_name_that_only_begins_the_path_is_no_base_path() -> None:
    event = v2(rawPath="/Production/", requestContext={"stage": "Prod", "http": {"method": "GET"}})
    assert http_request(event).base_path == ""


def test_cookies_come_back_as_one_header() -> None:
    assert http_request(v2(cookies=["a=1", "b=2"])).headers["cookie"] == "a=1; b=2"


def test_a_missing_host_is_the_apis_domain_name() -> None:
    event = v2(headers={}, requestContext={"domainName": "id.execute-api.us-east-1.amazonaws.com",
                                           "stage": "$default", "http": {"method": "POST"}})
    assert http_request(event).headers["host"] == "id.execute-api.us-east-1.amazonaws.com"


@pytest.mark.parametrize("event", [
    None, [], "GET /", {}, {"httpMethod": 7, "requestContext": {}}, {"version": "2.0"},
    {"version": "2.0", "requestContext": {"http": {}}}, {"httpMethod": "POST", "body": {"not": "text"}},
    {"version": "2.0", "requestContext": {"http": {"method": "GET"}}, "rawPath": ["/"]},
])
def test_anything_but_a_gateway_event_is_refused(event: Any) -> None:
    with pytest.raises(MalformedEvent):
        http_request(event)


def test_a_body_that_is_not_base64_is_refused() -> None:
    with pytest.raises(MalformedEvent, match="base64"):
        http_request(v1(body="not base64!", isBase64Encoded=True))


def test_answers_go_back_in_the_events_own_shape() -> None:
    response = HttpResponse(400, [("content-type", "text/xml"), ("x-a", "1"), ("x-a", "2")], b"<Error/>")
    rest = lambda_result(v1(), response)
    assert rest == {"statusCode": 400, "body": "<Error/>", "isBase64Encoded": False,
                    "headers": {"content-type": "text/xml", "x-a": "2"},
                    "multiValueHeaders": {"content-type": ["text/xml"], "x-a": ["1", "2"]}}
    http_api = lambda_result(v2(), response)
    assert http_api["headers"] == {"content-type": "text/xml", "x-a": "1, 2"} and "multiValueHeaders" not in http_api


def test_an_answer_that_is_not_text_goes_base64() -> None:
    result = lambda_result(v2(), HttpResponse(200, [], b"\xff\x00"))
    assert result["isBase64Encoded"] and base64.b64decode(result["body"]) == b"\xff\x00"
