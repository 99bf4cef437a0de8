"""The recorded event documents (tests/events/) read as the requests they carry."""

from __future__ import annotations

from ferrymq.frontend.lambda_events import http_request
from tests.support.lambda_events import load


def test_a_rest_api_proxy_event_on_the_execute_api_domain() -> None:
    request = http_request(load("rest-v1-proxy"))
    assert (request.method, request.path, request.base_path) == ("POST", "/Prod/", "/Prod")
    assert request.headers["host"] == "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com"
    assert request.headers["x-amz-target"] == "AmazonSQS.ListQueues"
    assert request.body == b'{"QueueNamePrefix": "orders"}'
    assert (request.peer, request.scheme) == ("198.51.100.23", "https")


def test_a_rest_api_query_get_through_a_custom_domain() -> None:
    request = http_request(load("rest-v1-query-custom-domain"))
    assert (request.method, request.path, request.base_path) == ("GET", "/123456789012/orders", "")
    assert request.query_string == ("Action=ReceiveMessage&AttributeName.1=All&MessageAttributeName.1=trace%20id"
                                    "&Version=2012-11-05")
    assert request.body == b""


def test_an_http_api_event_with_a_base64_body_under_a_stage() -> None:
    request = http_request(load("http-v2-stage"))
    assert (request.method, request.path, request.base_path) == ("POST", "/Prod/", "/Prod")
    assert request.body == b"Action=ListQueues&QueueNamePrefix=orders&Version=2012-11-05"
    assert int(request.headers["content-length"]) == len(request.body)


def test_a_function_url_event() -> None:
    request = http_request(load("function-url"))
    assert (request.method, request.path, request.base_path) == ("GET", "/", "")
    assert request.query_string == "Action=GetQueueUrl&QueueName=orders&Version=2012-11-05"
    assert request.peer == "198.51.100.80"
    assert request.base_url == "https://q7w6e5r4t3y2u1i0o9p8a7s6d5f4g3h2.lambda-url.us-east-1.on.aws"
