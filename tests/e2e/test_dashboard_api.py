"""The dashboard's JSON API over real HTTP against the session's stack: the login, the loopback rule, the
numbers against GetQueueAttributes, the cluster view, recent errors, and a redrive behind its CSRF token."""

from __future__ import annotations

import random
from typing import Any

import pytest
import requests
from botocore.exceptions import ClientError

import ferrymq
from tests.e2e.conftest import Stack
from tests.support.dashboard import (
    DashboardClient,
    counts,
    dead_lettered,
    hold_in_flight,
    new_queue,
    unique_prefix,
)
from tests.support.sqs_clients import sqs_client
from tests.support.waiting import wait_for


def _client(stack: Stack) -> DashboardClient:
    return DashboardClient(stack.endpoint)


def _logged_in(stack: Stack) -> DashboardClient:
    client = _client(stack)
    who = client.login(stack.access_key, stack.secret_key)
    assert who["admin"] is True and who["account"] == "000000000000"
    return client


def test_the_page_is_served_and_the_api_needs_a_login(stack: Stack) -> None:
    client = _client(stack)
    page = client.http.get(client.url(""), timeout=30)
    assert page.status_code == 200 and "text/html" in page.headers["Content-Type"]
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    assert client.http.get(client.url("app.js"), timeout=30).status_code == 200
    for path in ("session", "queues", "cluster", "errors", "mappings"):
        answer = client.get(path)
        assert answer.status_code == 401, path
        assert answer.json()["error"] == "LoginRequired"
    assert client.post("redrive", {"queueArn": "arn:aws:sqs:us-east-1:000000000000:x"}).status_code == 401


def test_a_wrong_secret_opens_no_session(stack: Stack) -> None:
    client = _client(stack)
    for key_id, secret in ((stack.access_key, "wrong"), ("AKIANOSUCHKEY", stack.secret_key)):
        answer = client.http.post(client.url("api/login"), json={"accessKeyId": key_id, "secretAccessKey": secret},
                                  timeout=30)
        assert answer.status_code == 401
        assert "set-cookie" not in answer.headers
    assert client.get("queues").status_code == 401


def test_the_session_cookie_is_httponly_and_samesite_strict(stack: Stack) -> None:
    answer = requests.post(f"{stack.endpoint}/dashboard/api/login", timeout=30,
                           json={"accessKeyId": stack.access_key, "secretAccessKey": stack.secret_key})
    cookie = answer.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/dashboard" in cookie


def test_a_logout_ends_the_session_for_every_copy_of_its_cookie_and_needs_the_csrf_token(stack: Stack) -> None:
    # given a session, and a copy of its cookie (as one stolen from the browser would be)
    client = _logged_in(stack)
    copy = requests.Session()
    copy.cookies.update(client.http.cookies)
    assert copy.get(client.url("api/session"), timeout=30).status_code == 200
    # when a logout comes without the session's CSRF token, then it is refused and the session lives on
    assert client.post("logout", {}, csrf=None).status_code == 403
    assert client.post("logout", {}, csrf="not-the-token").status_code == 403
    assert copy.get(client.url("api/session"), timeout=30).status_code == 200
    # when the session logs out, then neither the browser's cookie nor its copy opens anything any more
    assert client.post("logout", {}).status_code == 200
    answer = copy.get(client.url("api/queues"), timeout=30)
    assert answer.status_code == 401 and answer.json()["error"] == "LoginRequired"
    assert client.get("session").status_code == 401


def test_a_login_post_that_is_not_json_or_comes_from_another_origin_is_refused(stack: Stack) -> None:
    url = f"{stack.endpoint}/dashboard/api/login"
    form = requests.post(url, data={"accessKeyId": stack.access_key, "secretAccessKey": stack.secret_key},
                         timeout=30)
    assert form.status_code == 415
    foreign = requests.post(url, json={"accessKeyId": stack.access_key, "secretAccessKey": stack.secret_key},
                            headers={"Origin": "http://attacker.example"}, timeout=30)
    assert foreign.status_code == 403


def test_a_host_that_is_not_loopback_is_refused(stack: Stack) -> None:
    # What a DNS-rebinding page's requests look like: a loopback peer, the attacker's name in Host.
    answer = requests.get(f"{stack.endpoint}/dashboard/", headers={"Host": "attacker.example"}, timeout=30)
    assert answer.status_code == 403
    assert "loopback" in answer.json()["message"]


def test_queue_numbers_are_what_get_queue_attributes_says(stack: Stack) -> None:
    sqs = sqs_client(stack.endpoint, "json", access_key=stack.access_key, secret_key=stack.secret_key,
                     region=stack.region)
    name, url, _ = new_queue(sqs, "dash")
    for i in range(7):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    for i in range(2):
        sqs.send_message(QueueUrl=url, MessageBody=f"later{i}", DelaySeconds=900)
    hold_in_flight(sqs, url, 3)
    client = _logged_in(stack)
    shown = client.queue(name)
    expected = counts(sqs, url)
    assert expected == {"visible": 4, "inFlight": 3, "delayed": 2}
    assert {k: shown[k] for k in expected} == expected
    assert shown["oldestAgeSeconds"] is not None and shown["oldestAgeSeconds"] >= 0
    # The send rate reaches the chart's history once the history has sampled the sends.
    history = wait_for(lambda: [s for s in client.queue(name)["history"] if s[1] > 0], timeout=30)
    assert history


def test_a_plain_key_sees_its_own_account_only(stack: Stack) -> None:
    account = "".join(random.choice("123456789") for _ in range(12))
    key_id, secret = stack.create_credentials(account, "dash-user")
    own = sqs_client(stack.endpoint, "json", access_key=key_id, secret_key=secret, region=stack.region)
    name, _, _ = new_queue(own, "mine")
    client = DashboardClient(stack.endpoint)
    who = client.login(key_id, secret)
    assert who == {"accessKeyId": key_id, "account": account, "admin": False, "csrfToken": client.csrf}
    assert [q["name"] for q in client.get("queues").json()["queues"]] == [name]
    assert client.get("queues", account="000000000000").status_code == 403
    assert client.get("cluster").status_code == 403
    with pytest.raises(ClientError):
        own.get_queue_url(QueueName="no-such-queue-here")
    errors = client.get("errors").json()["errors"]
    assert errors and {e["account"] for e in errors} == {account}
    stack.ferrymq("credentials", "disable", key_id)
    wait_for(lambda: client.get("queues").status_code == 401)


def test_recent_errors_show_the_codes_sdks_see_with_their_request_ids(stack: Stack, sqs: Any) -> None:
    url = sqs.create_queue(QueueName=f"{unique_prefix('dash-errors')}.fifo",
                           Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    failing = {
        "GetQueueUrl": lambda: sqs.get_queue_url(QueueName="dashboard-missing-queue"),
        "ReceiveMessage": lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=11),
        "SendMessage": lambda: sqs.send_message(QueueUrl=url, MessageBody="no group"),
    }
    seen: dict[str, tuple[str, str]] = {}
    for action, call in failing.items():
        with pytest.raises(ClientError) as failed:
            call()
        response = failed.value.response
        seen[action] = (response["Error"]["Code"], response["ResponseMetadata"]["RequestId"])
    assert [code for code, _ in seen.values()] == [
        "AWS.SimpleQueueService.NonExistentQueue", "InvalidParameterValue", "MissingParameter"]
    client = _logged_in(stack)
    errors = client.get("errors").json()["errors"]
    for action, (code, request_id) in seen.items():
        mine = [e for e in errors if e["request_id"] == request_id]
        assert len(mine) == 1, action
        assert (mine[0]["action"], mine[0]["code"], mine[0]["account"]) == (action, code, "000000000000")


def test_the_apis_own_refusals_carry_the_codes_sdks_see(stack: Stack) -> None:
    client = _logged_in(stack)
    missing = client.post("redrive", {})
    absent = client.post("redrive", {"queueArn": "arn:aws:sqs:us-east-1:000000000000:x"})
    assert (missing.status_code, missing.json()["error"]) == (400, "InvalidParameterValue")
    assert client.post("login", {}).json()["error"] == "MissingParameter"
    assert absent.json()["error"] == "ResourceNotFoundException", absent.text


def test_the_cluster_view_lists_workers_and_partitions(stack: Stack) -> None:
    cluster = _logged_in(stack).get("cluster")
    assert cluster.status_code == 200, cluster.text
    status: dict[str, Any] = cluster.json()
    assert status["Workers"] and all(w["Address"] for w in status["Workers"])
    assert any(w["Alive"] for w in status["Workers"])
    partitions = status["Partitions"]
    assert partitions and all(p["Leader"] for p in partitions)
    assert all(p["Epoch"] >= 1 and p["InSyncReplicas"] for p in partitions)


def test_a_redrive_needs_the_sessions_csrf_token_and_moves_the_messages_back(stack: Stack) -> None:
    sqs = sqs_client(stack.endpoint, "json", access_key=stack.access_key, secret_key=stack.secret_key,
                     region=stack.region)
    group = unique_prefix("dash-redrive")
    source, dlq = dead_lettered(sqs, group, 3)
    client = _logged_in(stack)
    shown = client.queue(dlq["name"], group)
    assert shown["deadLetterSources"] == [source["name"]] and shown["visible"] == 3
    assert client.post("redrive", {"queueArn": dlq["arn"]}, csrf=None).status_code == 403
    assert client.post("redrive", {"queueArn": dlq["arn"]}, csrf="forged").status_code == 403
    other = _logged_in(stack)
    # A token is bound to its session: another session's is refused too.
    assert client.post("redrive", {"queueArn": dlq["arn"]}, csrf=other.csrf).status_code == 403
    assert counts(sqs, dlq["url"])["visible"] == 3
    started = client.post("redrive", {"queueArn": dlq["arn"]})
    assert started.status_code == 200, started.text
    assert started.json()["TaskHandle"]
    task = wait_for(lambda: (t := client.queue(dlq["name"], group)["moveTask"]) and t["Status"] == "COMPLETED" and t)
    assert task["ApproximateNumberOfMessagesMoved"] == 3
    assert wait_for(lambda: counts(sqs, source["url"])["visible"] == 3)
    assert counts(sqs, dlq["url"])["visible"] == 0


def _mappings_api(stack: Stack, key_id: str, secret: str) -> Any:
    return ferrymq.client("ferrymq", endpoint_url=stack.endpoint, region_name=stack.region,
                          aws_access_key_id=key_id, aws_secret_access_key=secret)


def test_mappings_are_listed_per_account_with_their_lease_and_never_a_secret(stack: Stack) -> None:
    sqs = sqs_client(stack.endpoint, "json", access_key=stack.access_key, secret_key=stack.secret_key,
                     region=stack.region)
    # given an admin's HTTP mapping whose URL path holds a token, and a plain key's function mapping
    account = "".join(random.choice("123456789") for _ in range(12))
    key_id, secret = stack.create_credentials(account, "dash-mappings")
    admin_api = _mappings_api(stack, stack.access_key, stack.secret_key)
    plain_api = _mappings_api(stack, key_id, secret)
    _, admin_url, admin_queue = new_queue(sqs, "dash-mapped")
    plain_sqs = sqs_client(stack.endpoint, "json", access_key=key_id, secret_key=secret, region=stack.region)
    _, plain_url, plain_queue = new_queue(plain_sqs, "dash-mapped")
    http = admin_api.create_event_source_mapping(EventSourceArn=admin_queue, BatchSize=7,
                                                 Destination={"Url": "http://127.0.0.1:9/hook/tok-path-secret"},
                                                 MaximumBatchingWindowInSeconds=3,
                                                 ScalingConfig={"MaximumConcurrency": 4})
    function = plain_api.create_event_source_mapping(EventSourceArn=plain_queue, FunctionName="dash:live",
                                                     Enabled=False)
    try:
        admin = _logged_in(stack)
        # then the admin's own account lists its mapping, and a push host soon holds its lease
        def held() -> dict[str, Any] | None:
            rows = admin.get("mappings", account="000000000000").json()["mappings"]
            row = next(r for r in rows if r["uuid"] == http["UUID"])
            return row if row["leaseHolder"] else None

        row = wait_for(held)
        assert {k: row[k] for k in ("account", "queueArn", "target", "targetKind", "state", "batchSize",
                                    "windowSeconds", "maxConcurrency")} == {
            "account": "000000000000", "queueArn": admin_queue, "target": "http://127.0.0.1:9",
            "targetKind": "url", "state": "Enabled", "batchSize": 7, "windowSeconds": 3, "maxConcurrency": 4}
        assert function["UUID"] not in {r["uuid"] for r in admin.get("mappings", account="000000000000")
                                        .json()["mappings"]}
        # and without an account the admin sees every account's, the plain one's as Lambda shows it
        everything = {r["uuid"]: r for r in admin.get("mappings").json()["mappings"]}
        assert {http["UUID"], function["UUID"]} <= everything.keys()
        assert everything[function["UUID"]]["target"] == function["FunctionArn"]
        assert everything[function["UUID"]]["state"] == "Disabled"
        assert everything[function["UUID"]]["leaseHolder"] is None
        # and the plain key sees its own mapping only, and may not ask for another account's
        plain = DashboardClient(stack.endpoint)
        plain.login(key_id, secret)
        for answer in (plain.get("mappings"), plain.get("mappings", account=account)):
            assert answer.status_code == 200
            assert [r["uuid"] for r in answer.json()["mappings"]] == [function["UUID"]]
        refused = plain.get("mappings", account="000000000000")
        assert refused.status_code == 403 and refused.json()["error"] == "AccessDenied"
        # and no answer holds the signing secret, the URL's path, or any field naming a secret
        for answer in (admin.get("mappings"), admin.get("mappings", account="000000000000")):
            text = answer.text
            assert http["SigningSecret"] not in text and "fmqs_" not in text and "tok-path-secret" not in text
            assert "secret" not in text.lower()
    finally:
        admin_api.delete_event_source_mapping(UUID=http["UUID"])
        plain_api.delete_event_source_mapping(UUID=function["UUID"])
        sqs.delete_queue(QueueUrl=admin_url)
        plain_sqs.delete_queue(QueueUrl=plain_url)
