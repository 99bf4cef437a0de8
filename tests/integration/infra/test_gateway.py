"""The local gateway process: binds any free port, serves the front end on keep-alive connections, stops cleanly."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

from ferrymq.infra.gateway import READY_PREFIX
from ferrymq.settings import Settings
from tests.integration.infra.processes import child_env, python_module, running


def test_gateway_serves_the_front_end_and_stops_on_sigterm(aws_settings: Settings) -> None:
    # given a gateway on port 0 against bootstrapped AWS resources
    env = child_env(AWS_ENDPOINT_URL=str(aws_settings.aws_endpoint_url), FERRYMQ_TABLE_PREFIX=aws_settings.table_prefix)
    argv = python_module("ferrymq.infra.gateway", "--host", "127.0.0.1", "--port", "0")
    with running(argv, READY_PREFIX, env) as gateway:
        address = urlsplit(gateway.url)
        assert address.port not in (None, 0)
        connection = http.client.HTTPConnection(address.hostname or "", address.port)
        # when two unsigned JSON requests arrive on one connection
        statuses = []
        for _ in range(2):
            connection.request("POST", "/", body=b"{}", headers={
                "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ListQueues"})
            response = connection.getresponse()
            statuses.append(response.status)
            body = json.loads(response.read())
            # then each gets an SQS error document from the front end, and the connection stays open
            assert "__type" in body
        assert all(400 <= status < 500 for status in statuses)
        connection.close()
        # and SIGTERM stops it with status 0
        assert gateway.terminate() == 0
