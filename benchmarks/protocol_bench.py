"""Time the wire protocol and SigV4 on the hot path: parse + render of SendMessage, ReceiveMessage and errors in
both protocols, and signature verification with a warm and a cold signing key.

    python benchmarks/protocol_bench.py [--number 20000]

It prints microseconds per call (best of five runs) and asserts nothing.
"""

from __future__ import annotations

import argparse
import calendar
import timeit
from collections.abc import Callable
from datetime import datetime
from unittest import mock
from urllib.parse import urlencode, urlsplit

import orjson
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ferrymq import sigv4
from ferrymq.errors import QueueDoesNotExist
from ferrymq.protocol.md5 import md5_of_attributes, md5_of_body
from ferrymq.protocol.requests import parse_request
from ferrymq.protocol.responses import render_error, render_result

QUEUE_URL = "http://127.0.0.1:9324/000000000000/bench"
BODY = "x" * 1024
ATTRIBUTES = {"trace": {"DataType": "String", "StringValue": "abc"}, "n": {"DataType": "Number", "StringValue": "1"}}
SEND_RESULT = {"MessageId": "0b4f5c2e-8d1a-4c3b-9e7f-1a2b3c4d5e6f", "MD5OfMessageBody": md5_of_body(BODY)}
RECEIVE_RESULT = {"Messages": [
    {"MessageId": f"id-{i}", "ReceiptHandle": "rh" * 40, "MD5OfBody": md5_of_body(BODY), "Body": BODY,
     "Attributes": {"SentTimestamp": "1700000000000"}, "MD5OfMessageAttributes": md5_of_attributes(ATTRIBUTES),
     "MessageAttributes": ATTRIBUTES}
    for i in range(10)
]}


def _json_send() -> tuple[dict[str, str], bytes]:
    headers = {"content-type": "application/x-amz-json-1.0", "x-amz-target": "AmazonSQS.SendMessage"}
    return headers, orjson.dumps({"QueueUrl": QUEUE_URL, "MessageBody": BODY, "MessageAttributes": ATTRIBUTES})


def _query_send() -> tuple[dict[str, str], bytes]:
    params = {"Action": "SendMessage", "Version": "2012-11-05", "QueueUrl": QUEUE_URL, "MessageBody": BODY,
              "MessageAttribute.1.Name": "trace", "MessageAttribute.1.Value.DataType": "String",
              "MessageAttribute.1.Value.StringValue": "abc", "MessageAttribute.2.Name": "n",
              "MessageAttribute.2.Value.DataType": "Number", "MessageAttribute.2.Value.StringValue": "1"}
    return {"content-type": "application/x-www-form-urlencoded"}, urlencode(params).encode()


def _signed_send() -> tuple[dict[str, str], bytes, float]:
    signed_at = datetime(2024, 3, 5, 12, 30, 0)
    headers, body = _json_send()
    request = AWSRequest(method="POST", url="http://127.0.0.1:9324/", data=body, headers=headers)
    with mock.patch("botocore.auth.get_current_datetime", return_value=signed_at):
        SigV4Auth(Credentials("AKID", "secret"), "sqs", "us-east-1").add_auth(request)
    prepared = request.prepare()
    wire_headers = {k.lower(): v for k, v in prepared.headers.items()}
    wire_headers.setdefault("host", urlsplit(prepared.url).netloc)
    return wire_headers, body, float(calendar.timegm(signed_at.timetuple()))


def _report(name: str, call: Callable[[], object], number: int) -> None:
    best = min(timeit.repeat(call, number=number, repeat=5)) / number
    print(f"{name:<52} {best * 1e6:8.2f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000, help="calls per timing run")
    number = parser.parse_args().number

    json_headers, json_body = _json_send()
    query_headers, query_body = _query_send()

    def json_send() -> None:
        request = parse_request("POST", "/", "", json_headers, json_body)
        render_result(request.protocol, request.action, SEND_RESULT, "req-1")

    def query_send() -> None:
        request = parse_request("POST", "/", "", query_headers, query_body)
        render_result(request.protocol, request.action, SEND_RESULT, "req-1")

    _report("SendMessage parse + render, JSON (1 KiB, 2 attrs)", json_send, number)
    _report("SendMessage parse + render, query (1 KiB, 2 attrs)", query_send, number)
    _report("ReceiveMessage render, 10 messages, JSON", lambda: render_result("json", "ReceiveMessage",
                                                                             RECEIVE_RESULT, "r"), number // 10)
    _report("ReceiveMessage render, 10 messages, query", lambda: render_result("query", "ReceiveMessage",
                                                                              RECEIVE_RESULT, "r"), number // 10)
    _report("error render, JSON", lambda: render_error("json", QueueDoesNotExist(), "r"), number)
    _report("error render, query", lambda: render_error("query", QueueDoesNotExist(), "r"), number)
    _report("md5_of_body + md5_of_attributes (1 KiB, 2 attrs)",
            lambda: (md5_of_body(BODY), md5_of_attributes(ATTRIBUTES)), number)

    headers, body, now = _signed_send()
    regions = frozenset({"us-east-1"})

    def verify() -> None:
        signed = sigv4.parse_signature("POST", "/", "", headers, regions=regions)
        sigv4.verify_signature(signed, "secret", method="POST", path="/", query_string="", headers=headers,
                               body=body, now=now)

    verify()
    _report("SigV4 parse + verify, signing key cached", verify, number)

    def verify_cold() -> None:
        sigv4._signing_key.cache_clear()
        verify()

    _report("SigV4 parse + verify, signing key derived", verify_cold, number)


if __name__ == "__main__":
    main()
