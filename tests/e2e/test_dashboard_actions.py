"""The dashboard's queue actions (peek, send a test message, purge, delete) over its JSON API against the
session's stack: what each does, checked with boto3, and what each refuses: no session, a missing, forged or
another session's CSRF token, another origin, another account's queue for a plain key, and bad input. The
error codes are the ones SDKs show."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.e2e.conftest import Stack
from tests.support.dashboard import DashboardClient, counts, new_queue
from tests.support.sqs_clients import sqs_client

ROUTES = ("peek", "send", "purge", "delete")
HOSTILE_BODY = '<img src=x onerror="document.title=1"><script>alert(1)</script> & "quotes"'


def _admin(stack: Stack) -> Any:
    return sqs_client(stack.endpoint, "json", access_key=stack.access_key, secret_key=stack.secret_key,
                      region=stack.region)


def _logged_in(stack: Stack, key_id: str | None = None, secret: str | None = None) -> DashboardClient:
    client = DashboardClient(stack.endpoint)
    client.login(key_id or stack.access_key, secret or stack.secret_key)
    return client


def _request(route: str, url: str) -> dict[str, Any]:
    return {"queueUrl": url, "messageBody": "from the dashboard"} if route == "send" else {"queueUrl": url}


def _plain_key(stack: Stack) -> tuple[str, str, str]:
    """(account, key id, secret) of a plain key of a new account."""
    account = "".join(random.choice("123456789") for _ in range(12))
    key_id, secret = stack.create_credentials(account, "dash-actions")
    return account, key_id, secret


def _unchanged(sqs: Any, url: str, visible: int) -> bool:
    return counts(sqs, url) == {"visible": visible, "inFlight": 0, "delayed": 0}


def test_a_peek_shows_the_messages_without_receiving_them(stack: Stack) -> None:
    sqs = _admin(stack)
    _, url, _ = new_queue(sqs, "dash-peek")
    bodies = ["first", HOSTILE_BODY, "third"]
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    client = _logged_in(stack)

    answer = client.post("peek", {"queueUrl": url, "maxNumberOfMessages": 10})

    assert answer.status_code == 200, answer.text
    messages = answer.json()["Messages"]
    assert sorted(m["Body"] for m in messages) == sorted(bodies)
    assert all(m["ReceiveCount"] == 0 and m["SentTimestamp"] > 0 for m in messages)
    assert _unchanged(sqs, url, 3)
    assert len(client.post("peek", {"queueUrl": url, "maxNumberOfMessages": 1}).json()["Messages"]) == 1


def test_a_test_message_sent_from_the_dashboard_is_received_as_sent(stack: Stack) -> None:
    sqs = _admin(stack)
    _, url, _ = new_queue(sqs, "dash-send")
    client = _logged_in(stack)

    sent = client.post("send", {"queueUrl": url, "messageBody": HOSTILE_BODY})

    assert sent.status_code == 200, sent.text
    received = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert [(m["MessageId"], m["Body"]) for m in received] == [(sent.json()["MessageId"], HOSTILE_BODY)]


def test_a_fifo_test_message_needs_its_group_as_sqs_does(stack: Stack) -> None:
    sqs = _admin(stack)
    name_fifo = sqs.create_queue(QueueName=f"dash-send-{random.randrange(10**9)}.fifo",
                                 Attributes={"FifoQueue": "true"})["QueueUrl"]
    client = _logged_in(stack)

    missing = client.post("send", {"queueUrl": name_fifo, "messageBody": "x", "messageDeduplicationId": "d1"})
    sent = client.post("send", {"queueUrl": name_fifo, "messageBody": "x", "messageGroupId": "g",
                                "messageDeduplicationId": "d1"})

    assert missing.status_code == 400 and missing.json()["error"] == "MissingParameter"
    assert sent.status_code == 200 and sent.json()["SequenceNumber"]
    received = sqs.receive_message(QueueUrl=name_fifo, AttributeNames=["MessageGroupId"])["Messages"]
    assert received[0]["Attributes"]["MessageGroupId"] == "g"


def test_purge_empties_the_queue_and_delete_removes_it(stack: Stack) -> None:
    sqs = _admin(stack)
    _, url, _ = new_queue(sqs, "dash-purge")
    for i in range(4):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    client = _logged_in(stack)

    purged = client.post("purge", {"queueUrl": url})
    assert purged.status_code == 200, purged.text
    assert counts(sqs, url)["visible"] == 0
    deleted = client.post("delete", {"queueUrl": url})
    assert deleted.status_code == 200, deleted.text

    with pytest.raises(ClientError) as gone:
        sqs.get_queue_attributes(QueueUrl=url)
    assert gone.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    again = client.post("delete", {"queueUrl": url})
    assert again.status_code == 400 and again.json()["error"] == "AWS.SimpleQueueService.NonExistentQueue"


@pytest.mark.parametrize("route", ROUTES)
def test_an_action_without_the_sessions_csrf_token_or_a_session_does_nothing(stack: Stack, route: str) -> None:
    sqs = _admin(stack)
    _, url, _ = new_queue(sqs, "dash-csrf")
    sqs.send_message(QueueUrl=url, MessageBody="kept")
    client, other = _logged_in(stack), _logged_in(stack)

    for token in (None, "forged", other.csrf):
        refused = client.post(route, _request(route, url), csrf=token)
        assert refused.status_code == 403 and refused.json()["error"] == "InvalidCsrfToken", (token, refused.text)
    assert DashboardClient(stack.endpoint).post(route, _request(route, url), csrf="forged").status_code == 401
    foreign = client.http.post(client.url(f"api/{route}"), json=_request(route, url), timeout=30,
                               headers={"X-CSRF-Token": client.csrf or "", "Origin": "http://attacker.example"})
    assert foreign.status_code == 403
    as_form = client.http.post(client.url(f"api/{route}"), data=_request(route, url), timeout=30,
                               headers={"X-CSRF-Token": client.csrf or ""})
    assert as_form.status_code == 415

    assert _unchanged(sqs, url, 1)


@pytest.mark.parametrize("route", ROUTES)
def test_a_plain_key_cannot_act_on_another_accounts_queue(stack: Stack, route: str) -> None:
    sqs = _admin(stack)
    _, url, _ = new_queue(sqs, "dash-other")
    sqs.send_message(QueueUrl=url, MessageBody="kept")
    _, key_id, secret = _plain_key(stack)
    client = _logged_in(stack, key_id, secret)

    refused = client.post(route, _request(route, url))

    assert refused.status_code == 403 and refused.json()["error"] == "AccessDenied", refused.text
    assert _unchanged(sqs, url, 1)


def test_a_plain_key_acts_on_its_own_queues_and_as_far_as_a_policy_allows(stack: Stack) -> None:
    account, key_id, secret = _plain_key(stack)
    own = sqs_client(stack.endpoint, "json", access_key=key_id, secret_key=secret, region=stack.region)
    _, own_url, _ = new_queue(own, "dash-own")
    sqs = _admin(stack)
    _, shared_url, shared_arn = new_queue(sqs, "dash-shared")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": account},
                                                      "Action": "sqs:SendMessage", "Resource": shared_arn}]}
    sqs.set_queue_attributes(QueueUrl=shared_url, Attributes={"Policy": json.dumps(policy)})
    client = _logged_in(stack, key_id, secret)

    assert client.post("send", {"queueUrl": own_url, "messageBody": "mine"}).status_code == 200
    assert [m["Body"] for m in client.post("peek", {"queueUrl": own_url}).json()["Messages"]] == ["mine"]
    assert client.post("send", {"queueUrl": shared_url, "messageBody": "allowed"}).status_code == 200
    assert client.post("peek", {"queueUrl": shared_url}).status_code == 403
    assert client.post("purge", {"queueUrl": shared_url}).status_code == 403
    assert client.post("delete", {"queueUrl": own_url}).status_code == 200

    assert _unchanged(sqs, shared_url, 1)
    with pytest.raises(ClientError):
        own.get_queue_url(QueueName=own_url.rsplit("/", 1)[1])


@pytest.mark.parametrize(("route", "document", "status", "code"), [
    ("peek", {}, 400, "MissingParameter"),
    ("peek", {"queueUrl": 42}, 400, "InvalidParameterValue"),
    ("peek", {"queueUrl": ["x"]}, 400, "InvalidParameterValue"),
    ("peek", {"queueUrl": "not a url/"}, 404, "InvalidAddress"),
    ("peek", {"queueUrl": "http://h/" + "a" * 2000}, 400, "InvalidParameterValue"),
    ("peek", {"queueUrl": "{url}", "maxNumberOfMessages": 1000}, 400, "InvalidParameterValue"),
    ("peek", {"queueUrl": "{url}", "maxNumberOfMessages": "10"}, 400, "InvalidParameterValue"),
    ("send", {"queueUrl": "{url}"}, 400, "MissingParameter"),
    ("send", {"queueUrl": "{url}", "messageBody": {"a": 1}}, 400, "InvalidParameterValue"),
    ("send", {"queueUrl": "{url}", "messageBody": "bad \u0000 char"}, 400, "InvalidMessageContents"),
    ("send", {"queueUrl": "{url}", "messageBody": "x", "messageGroupId": 7}, 400, "InvalidParameterValue"),
    ("send", {"queueUrl": "{url}", "messageBody": "x" * 20_000}, 413, "RequestTooLarge"),
    ("purge", {"queueUrl": "{url}/../../other"}, 404, "InvalidAddress"),
    ("delete", {"queueUrl": None}, 400, "MissingParameter"),
])
def test_bad_input_to_an_action_is_refused_with_the_code_sdks_see(stack: Stack, route: str,
                                                                   document: dict[str, Any], status: int,
                                                                   code: str) -> None:
    sqs = _admin(stack)
    _, url, _ = new_queue(sqs, "dash-bad")
    sqs.send_message(QueueUrl=url, MessageBody="kept")
    client = _logged_in(stack)
    filled = {k: v.replace("{url}", url) if isinstance(v, str) else v for k, v in document.items()}

    refused = client.post(route, filled)

    assert (refused.status_code, refused.json()["error"]) == (status, code), refused.text
    assert _unchanged(sqs, url, 1)


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'"a string"'])
def test_a_malformed_body_is_refused(stack: Stack, body: bytes) -> None:
    client = _logged_in(stack)
    answer = client.http.post(client.url("api/send"), data=body, timeout=30,
                              headers={"Content-Type": "application/json", "X-CSRF-Token": client.csrf or ""})
    assert answer.status_code == 400 and answer.json()["error"] == "MalformedJson"
