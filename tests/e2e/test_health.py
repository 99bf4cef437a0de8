"""The gateway's health checks, as a load balancer or an orchestrator probes them: unsigned GETs."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from tests.e2e.conftest import Stack


def probe(stack: Stack, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{stack.endpoint}{path}", timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"{}")


def test_live_and_ready_need_no_signature(stack: Stack) -> None:
    assert probe(stack, "/health/live") == (200, {"status": "live"})
    status, ready = probe(stack, "/health/ready")
    assert status == 200, ready
    assert ready == {"status": "ready", "checks": {"metadata": "ok", "partitions": {"0": "ok"}}}


def test_other_unsigned_requests_are_still_refused_as_sqs_refuses_them(stack: Stack) -> None:
    for path in ("/health", "/health/live?Action=ListQueues", "/"):
        status, _ = _raw_status(stack, path)
        assert status == 403, path


def _raw_status(stack: Stack, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"{stack.endpoint}{path}", timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()
