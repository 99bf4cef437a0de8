"""Server-side encryption through real boto3 clients against ``ferrymq up``: round trips on both wire protocols
with SSE-SQS, SSE-KMS (a key created in the stack's KMS) and SSE off; no plaintext on disk or on the
replication stream; KMS's refusals as SQS's errors; dead-letter redrive and move tasks across queues with other
encryption settings; and changes of a queue's settings.

The stack caps the data-key cache at 1 s (``FERRYMQ_SSE_KEY_CACHE_SECONDS``), so that disabling a key takes
effect within the test, and its followers fetch through recording proxies (``FERRYMQ_WORKER_REPLICATION_PORT``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Stack
from tests.support.errors import expect_error
from tests.support.ports import consecutive_free_ports
from tests.support.recording_proxy import RecordingProxy
from tests.support.sqs_clients import sqs_client
from tests.support.waiting import wait_for

KEY_CACHE_SECONDS = 1.0


@pytest.fixture(scope="module")
def sse_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, list[RecordingProxy]]]:
    workers = consecutive_free_ports(3)
    first_proxy = consecutive_free_ports(3, avoid=range(workers, workers + 3))
    proxies = [
        RecordingProxy(lambda i=i: ("127.0.0.1", workers + i), port=first_proxy + i)  # type: ignore[misc]
        for i in range(3)
    ]
    stack = Stack(Path(tmp_path_factory.mktemp("sse-stack")), {
        "FERRYMQ_WORKER_PORT": str(workers),
        "FERRYMQ_WORKER_REPLICATION_PORT": str(first_proxy),
        "FERRYMQ_SSE_KEY_CACHE_SECONDS": str(KEY_CACHE_SECONDS),
        "FERRYMQ_LEADER_HANDOVER_SECONDS": "0",
    })
    try:
        stack.start()
        yield stack, proxies
    finally:
        stack.stop()
        for proxy in proxies:
            proxy.close()


@pytest.fixture
def stack_of(sse_stack: tuple[Stack, list[RecordingProxy]]) -> Stack:
    return sse_stack[0]


def _sqs(stack: Stack, protocol: str) -> Any:
    return sqs_client(stack.endpoint, protocol, access_key=stack.access_key, secret_key=stack.secret_key,
                      region=stack.region)


def _new_key(stack: Stack, **kwargs: Any) -> tuple[str, str]:
    """A KMS key in the stack's KMS and an alias of it: (key ARN, alias)."""
    kms = stack.aws_client("kms")
    arn = kms.create_key(Description="e2e customer key", **kwargs)["KeyMetadata"]["Arn"]
    alias = f"alias/e2e-{uuid.uuid4().hex[:10]}"
    kms.create_alias(AliasName=alias, TargetKeyId=arn)
    return arn, alias


def _queue(sqs: Any, prefix: str, **attributes: str) -> tuple[str, str]:
    url = sqs.create_queue(QueueName=f"{prefix}-{uuid.uuid4().hex[:10]}", Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def _sse_attributes(stack: Stack, mode: str) -> dict[str, str]:
    if mode == "kms":
        return {"KmsMasterKeyId": _new_key(stack)[1]}
    if mode == "none":
        return {"SqsManagedSseEnabled": "false"}
    return {}


def _attributes(marker: str) -> dict[str, Any]:
    return {
        "colour": {"DataType": "String", "StringValue": f"attr-{marker}"},
        "weight": {"DataType": "Number", "StringValue": "12.5"},
        "blob": {"DataType": "Binary", "BinaryValue": f"bin-{marker}".encode()},
    }


def _receive_all(sqs: Any, url: str, count: int, **kwargs: Any) -> list[dict[str, Any]]:
    got: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + 20
    while len(got) < count and time.monotonic() < deadline:
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                     MessageAttributeNames=["All"], AttributeNames=["All"],
                                     **kwargs).get("Messages", []):
            got[m["MessageId"]] = m
    assert len(got) == count, f"received {len(got)} of {count}"
    return list(got.values())


# --- round trips -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sqs", "kms", "none"])
def test_messages_round_trip_with_their_attributes_and_md5s(stack_of: Stack, protocol: str, mode: str) -> None:
    # given a queue with SSE-SQS, SSE-KMS (a customer key, by alias) or no encryption
    stack = stack_of
    sqs = _sqs(stack, protocol)
    settings = _sse_attributes(stack, mode)
    url, _ = _queue(sqs, f"rt-{mode}", **settings)
    shown = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    # then GetQueueAttributes says how it encrypts
    assert shown["SqsManagedSseEnabled"] == ("true" if mode == "sqs" else "false")
    assert shown.get("KmsMasterKeyId") == settings.get("KmsMasterKeyId")
    assert ("KmsDataKeyReusePeriodSeconds" in shown) == (mode == "kms")
    # when a message with attributes and a batch are sent
    sent = sqs.send_message(QueueUrl=url, MessageBody=f"single-{mode}", MessageAttributes=_attributes("single"))
    assert sent["MD5OfMessageBody"] == hashlib.md5(f"single-{mode}".encode()).hexdigest()
    batch = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"batch-{i}-" + "é" * 300, "MessageAttributes": _attributes(str(i))}
        for i in range(3)
    ])
    assert len(batch["Successful"]) == 3 and not batch.get("Failed")
    # then each comes back as sent, with the MD5s the send returned
    md5_attrs = {sent["MessageId"]: sent["MD5OfMessageAttributes"]}
    md5_attrs.update({e["MessageId"]: e["MD5OfMessageAttributes"] for e in batch["Successful"]})
    received = {m["MessageId"]: m for m in _receive_all(sqs, url, 4)}
    assert received[sent["MessageId"]]["Body"] == f"single-{mode}"
    for entry in batch["Successful"]:
        assert received[entry["MessageId"]]["Body"] == f"batch-{entry['Id']}-" + "é" * 300
        assert received[entry["MessageId"]]["MessageAttributes"]["blob"]["BinaryValue"] == f"bin-{entry['Id']}".encode()
    for message_id, m in received.items():
        assert m["MD5OfBody"] == hashlib.md5(m["Body"].encode()).hexdigest()
        assert m["MD5OfMessageAttributes"] == md5_attrs[message_id]
        assert m["MessageAttributes"]["weight"] == {"DataType": "Number", "StringValue": "12.5"}
    # and a receive asking for some attributes only gets those, with their own MD5
    sqs.send_message(QueueUrl=url, MessageBody="partial", MessageAttributes=_attributes("partial"))
    (partial,) = [m for m in _receive_all(sqs, url, 1, VisibilityTimeout=30) if m["Body"] == "partial"]
    assert set(partial["MessageAttributes"]) == set(_attributes("x"))


# --- nothing readable at rest or on the wire ---------------------------------------------------------


def _files_under(directory: Path) -> Iterator[tuple[Path, bytes]]:
    for path in directory.rglob("*"):
        if path.is_file():
            try:
                yield path, path.read_bytes()
            except OSError:
                continue


def _forms(marker: str) -> list[bytes]:
    """Ways a marker could be stored: as UTF-8, as the base64 of a Binary attribute, in UTF-16."""
    return [marker.encode(), base64.b64encode(f"bin-{marker}".encode()), marker.encode("utf-16-le")]


def test_no_plaintext_body_or_attribute_on_disk_or_on_the_replication_stream(
    sse_stack: tuple[Stack, list[RecordingProxy]],
) -> None:
    stack, proxies = sse_stack
    sqs = _sqs(stack, "json")
    run = uuid.uuid4().hex[:12]
    on = {mode: f"SSEON{mode.upper()}{run}" for mode in ("sqs", "kms")}
    off = f"SSEOFF{run}"
    # given marked bodies and attributes sent to queues with SSE-SQS and SSE-KMS, and to one without SSE
    for mode, marker in on.items():
        url, _ = _queue(sqs, f"scan-{mode}", **_sse_attributes(stack, mode))
        for i in range(5):
            sqs.send_message(QueueUrl=url, MessageBody=f"{marker}-body-{i}",
                             MessageAttributes=_attributes(f"{marker}-{i}"))
    plain_url, _ = _queue(sqs, "scan-none", SqsManagedSseEnabled="false")
    for i in range(5):
        sqs.send_message(QueueUrl=plain_url, MessageBody=f"{off}-body-{i}", MessageAttributes=_attributes(f"{off}-{i}"))

    # when the followers have fetched them (the plain ones show on the stream) and everything on disk is read
    def stream() -> bytes:
        return b"".join(p.seen for p in proxies)

    wait_for(lambda: stream().count(f"{off}-body-4".encode()) >= 2)
    files = list(_files_under(stack.data_dir))
    disk = b"".join(data for _, data in files)
    captured = stream()
    # then the messages sent without SSE are found, proving the scan sees bodies and attributes...
    assert f"{off}-body-0".encode() in disk and f"attr-{off}-0".encode() in disk
    assert f"{off}-body-0".encode() in captured and f"bin-{off}-0".encode() in captured
    # ...and nothing of the encrypted ones is, in any form, in any file or on the stream
    for marker in on.values():
        for form in _forms(marker):
            leaks = [str(path) for path, data in files if form in data]
            assert not leaks, f"{form!r} in {leaks}"
            assert form not in captured, f"{form!r} on the replication stream"


# --- KMS refusals ----------------------------------------------------------------------------------------


def test_a_disabled_or_deleted_key_refuses_send_and_receive_with_sqs_kms_errors(
    stack_of: Stack, protocol: str,
) -> None:
    # given a queue encrypting with a customer key, holding a message, and made visible again at once
    stack = stack_of
    sqs = _sqs(stack, protocol)
    kms = stack.aws_client("kms")
    key_arn, _ = _new_key(stack)
    url, _ = _queue(sqs, "kms-err", KmsMasterKeyId=key_arn, VisibilityTimeout="0")
    sqs.send_message(QueueUrl=url, MessageBody="before")
    # when the key is disabled (and the data keys cached before have expired)
    # By key id: the stand-in's KMS does not take an ARN here.
    key_id = key_arn.rsplit("/", 1)[1]
    kms.disable_key(KeyId=key_id)
    time.sleep(KEY_CACHE_SECONDS + 0.5)
    # then sending and receiving both fail with KMS.DisabledException, naming the key
    expect_error(lambda: sqs.send_message(QueueUrl=url, MessageBody="during"), "KMS.DisabledException", 400,
                 json_code="KmsDisabled", message=key_arn)
    expect_error(lambda: sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "b"}]),
                 "KMS.DisabledException", 400)
    expect_error(lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1), "KMS.DisabledException", 400,
                 json_code="KmsDisabled")
    # and once it is enabled again, the message sent before is readable and new ones are accepted
    kms.enable_key(KeyId=key_id)
    sqs.send_message(QueueUrl=url, MessageBody="after")
    assert {m["Body"] for m in _receive_all(sqs, url, 2)} == {"before", "after"}
    # when the key is scheduled for deletion, then it is KMS.InvalidStateException
    kms.schedule_key_deletion(KeyId=key_id, PendingWindowInDays=7)
    time.sleep(KEY_CACHE_SECONDS + 0.5)
    expect_error(lambda: sqs.send_message(QueueUrl=url, MessageBody="late"), "KMS.InvalidStateException", 400,
                 json_code="KmsInvalidState", message="pending deletion")
    expect_error(lambda: sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1), "KMS.InvalidStateException", 400)


def _kms_account(stack: Stack) -> str:
    """The account the stack's own KMS keys live in: the service's, never shown to a tenant."""
    meta = stack.aws_client("kms").describe_key(KeyId="alias/ferrymq/credentials")["KeyMetadata"]
    return str(meta["AWSAccountId"])


@pytest.mark.parametrize("missing", ["alias/no-such-key", "11111111-2222-3333-4444-555555555555"])
def test_an_unknown_key_refuses_send_with_kms_not_found(stack_of: Stack, protocol: str, missing: str) -> None:
    sqs = _sqs(stack_of, protocol)
    url, _ = _queue(sqs, "kms-missing", KmsMasterKeyId=missing)
    refusal = expect_error(lambda: sqs.send_message(QueueUrl=url, MessageBody="x"), "KMS.NotFoundException", 400,
                           json_code="KmsNotFound", message=missing)
    # the key is named as the queue names it: not by an ARN in the service's KMS account
    assert _kms_account(stack_of) not in str(refusal.response), refusal.response


def _service_key_forms(stack: Stack, alias: str) -> dict[str, str]:
    meta = stack.aws_client("kms").describe_key(KeyId=alias)["KeyMetadata"]
    arn = str(meta["Arn"])
    return {"alias": alias, "alias-arn": arn.split(":key/")[0] + ":" + alias, "key-id": str(meta["KeyId"]),
            "key-arn": arn}


@pytest.mark.parametrize("form", ["alias", "alias-arn", "key-id", "key-arn"])
@pytest.mark.parametrize("service_key", ["alias/ferrymq/credentials", "alias/ferrymq/managed-sse"])
def test_a_service_key_is_accepted_as_an_attribute_but_refused_at_send_with_kms_access_denied(
    stack_of: Stack, protocol: str, service_key: str, form: str,
) -> None:
    # given a queue created, as SQS creates it, with KmsMasterKeyId naming one of the service's own keys
    sqs = _sqs(stack_of, protocol)
    named = _service_key_forms(stack_of, service_key)[form]
    url, _ = _queue(sqs, "kms-service", KmsMasterKeyId=named)
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["KmsMasterKeyId"])["Attributes"] == {
        "KmsMasterKeyId": named}
    # when a message is sent, alone or in a batch, then KMS.AccessDeniedException refuses it, naming the key as named
    for _ in range(2):  # and again once the refusal is known, without a key to fall back on
        refusal = expect_error(lambda: sqs.send_message(QueueUrl=url, MessageBody="secret"),
                               "KMS.AccessDeniedException", 400, json_code="KmsAccessDenied", message=named)
    expect_error(lambda: sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "b"}]),
                 "KMS.AccessDeniedException", 400, json_code="KmsAccessDenied")
    if form in ("alias", "key-id"):
        assert _kms_account(stack_of) not in str(refusal.response), refusal.response
    # and nothing was stored
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages") is None


def test_a_queue_switched_to_a_service_key_is_refused_and_one_switched_back_sends_again(
    stack_of: Stack, protocol: str,
) -> None:
    # given a queue that sends under a customer key, then under SSE-SQS, so data keys of both are held
    sqs = _sqs(stack_of, protocol)
    _, alias = _new_key(stack_of)
    url, _ = _queue(sqs, "kms-switch", KmsMasterKeyId=alias)
    sqs.send_message(QueueUrl=url, MessageBody="customer")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": ""})
    sqs.send_message(QueueUrl=url, MessageBody="managed")
    # when it is switched to the managed key by its ARN (where SSE-SQS's data keys are held), then sends are refused
    managed_arn = _service_key_forms(stack_of, "alias/ferrymq/managed-sse")["key-arn"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": managed_arn})
    expect_error(lambda: sqs.send_message(QueueUrl=url, MessageBody="refused"), "KMS.AccessDeniedException", 400)
    # and switched back to the customer key, it sends, and every message sent before reads back
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": alias})
    sqs.send_message(QueueUrl=url, MessageBody="again")
    assert {m["Body"] for m in _receive_all(sqs, url, 3)} == {"customer", "managed", "again"}


def test_alias_aws_sqs_encrypts_with_the_managed_key_and_another_accounts_is_refused(
    stack_of: Stack, protocol: str,
) -> None:
    # given queues naming the AWS-managed key of SQS by alias and by the alias ARN of the queue's account
    sqs = _sqs(stack_of, protocol)
    url, queue_arn = _queue(sqs, "kms-aws-sqs", KmsMasterKeyId="alias/aws/sqs")
    _, _, _, region, account, _ = queue_arn.split(":")
    arn_url, _ = _queue(sqs, "kms-aws-sqs-arn", KmsMasterKeyId=f"arn:aws:kms:{region}:{account}:alias/aws/sqs")
    # when messages are sent, then they round trip, encrypted
    for each in (url, arn_url):
        sqs.send_message(QueueUrl=each, MessageBody="managed for me", MessageAttributes=_attributes("m"))
        (got,) = _receive_all(sqs, each, 1)
        assert got["Body"] == "managed for me"
        assert got["MessageAttributes"]["colour"]["StringValue"] == "attr-m"
    # and another account's alias/aws/sqs is not the caller's: refused, naming only what the queue names
    other = f"arn:aws:kms:{region}:999999999999:alias/aws/sqs"
    other_url, _ = _queue(sqs, "kms-aws-sqs-other", KmsMasterKeyId=other)
    refusal = expect_error(lambda: sqs.send_message(QueueUrl=other_url, MessageBody="x"),
                           "KMS.AccessDeniedException", 400, message=other)
    assert _kms_account(stack_of) not in str(refusal.response), refusal.response


def test_a_signing_key_refuses_send_with_kms_invalid_key_usage(stack_of: Stack) -> None:
    sqs = _sqs(stack_of, "json")
    key_arn, _ = _new_key(stack_of, KeyUsage="SIGN_VERIFY", KeySpec="RSA_2048")
    url, _ = _queue(sqs, "kms-usage", KmsMasterKeyId=key_arn)
    expect_error(lambda: sqs.send_message(QueueUrl=url, MessageBody="x"), "KMS.InvalidKeyUsageException", 400,
                 json_code="KmsInvalidKeyUsage")


# --- messages that move between queues --------------------------------------------------------------


@pytest.mark.parametrize("dlq_mode", ["sqs", "kms", "none"])
def test_dead_letters_and_moved_messages_open_under_the_queue_they_were_sent_to(stack_of: Stack,
                                                                               dlq_mode: str) -> None:
    # given a source queue with a customer key whose dead-letter queue encrypts otherwise (or not at all)
    stack = stack_of
    sqs = _sqs(stack, "json")
    source_key, _ = _new_key(stack)
    dlq_url, dlq_arn = _queue(sqs, f"sse-dlq-{dlq_mode}", **_sse_attributes(stack, dlq_mode))
    src_url, src_arn = _queue(sqs, "sse-src", KmsMasterKeyId=source_key, RedrivePolicy=json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}))
    sent = sqs.send_message(QueueUrl=src_url, MessageBody="poison pill", MessageAttributes=_attributes("dl"))
    # when it is received too often, and redriven to the dead-letter queue
    sqs.receive_message(QueueUrl=src_url, VisibilityTimeout=0, WaitTimeSeconds=2)
    sqs.receive_message(QueueUrl=src_url, VisibilityTimeout=0, WaitTimeSeconds=1)
    (dead,) = _receive_all(sqs, dlq_url, 1, VisibilityTimeout=0)
    # then the dead-letter queue returns it in plaintext, with its attributes, MD5s and source
    assert (dead["MessageId"], dead["Body"]) == (sent["MessageId"], "poison pill")
    assert dead["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert dead["MessageAttributes"]["colour"]["StringValue"] == "attr-dl"
    assert dead["Attributes"]["DeadLetterQueueSourceArn"] == src_arn
    # when a move task takes it back to its source (which now tolerates the receives it already had)
    sqs.set_queue_attributes(QueueUrl=src_url, Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 10})})
    sqs.start_message_move_task(SourceArn=dlq_arn, MaxNumberOfMessagesPerSecond=100)
    wait_for(lambda: [t for t in sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
                       if t["Status"] == "COMPLETED"])
    # then the source queue returns it in plaintext too, as the task's copy (a message id of its own)
    (back,) = _receive_all(sqs, src_url, 1)
    assert back["MessageId"] != sent["MessageId"] and back["Body"] == "poison pill"
    assert back["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert back["MessageAttributes"]["blob"]["BinaryValue"] == b"bin-dl"


# --- changing a queue's settings ---------------------------------------------------------------------


def test_turning_sse_off_stores_new_messages_as_sent_and_keeps_old_ones_readable(stack_of: Stack) -> None:
    # given a queue with SSE-SQS holding an encrypted message
    stack = stack_of
    sqs = _sqs(stack, "json")
    run = uuid.uuid4().hex[:12]
    url, _ = _queue(sqs, "sse-switch")
    sqs.send_message(QueueUrl=url, MessageBody=f"ENCRYPTED{run}")
    # when SSE is turned off, and another message sent
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"SqsManagedSseEnabled": "false"})
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["SqsManagedSseEnabled"])["Attributes"] == {
        "SqsManagedSseEnabled": "false"}
    sqs.send_message(QueueUrl=url, MessageBody=f"PLAIN{run}")
    # then the new one is stored as sent, the old one stays encrypted, and both are received in plaintext
    disk = b"".join(data for _, data in _files_under(stack.data_dir))
    assert f"PLAIN{run}".encode() in disk and f"ENCRYPTED{run}".encode() not in disk
    assert {m["Body"] for m in _receive_all(sqs, url, 2)} == {f"ENCRYPTED{run}", f"PLAIN{run}"}
    # and turning it on again with a customer key encrypts the next one under that key
    key_arn, _ = _new_key(stack)
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": key_arn})
    sqs.send_message(QueueUrl=url, MessageBody=f"AGAIN{run}")
    assert f"AGAIN{run}".encode() not in b"".join(data for _, data in _files_under(stack.data_dir))
    assert [m["Body"] for m in _receive_all(sqs, url, 1)] == [f"AGAIN{run}"]
