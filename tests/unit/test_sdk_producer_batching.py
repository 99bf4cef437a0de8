"""The producer's batching and retry rules with a fake SQS client (no network), and its byte counting
checked against the front end's own."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ferrymq.frontend.message_checks import check_message_attributes
from ferrymq.limits import MAX_BATCH_BYTES
from ferrymq.message_size import attributes_bytes, message_bytes
from ferrymq.producer import BatchEntryError, Producer

ATTRIBUTES = {
    "trace": {"DataType": "String", "StringValue": "ünïcode ✓"},
    "n": {"DataType": "Number.int", "StringValue": "42"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\x02\xff"},
}


def test_message_bytes_count_as_the_front_end_counts() -> None:
    body = "héllo ✓ 𝄞"
    expected = len(body.encode()) + attributes_bytes(check_message_attributes(ATTRIBUTES))
    assert message_bytes(body, ATTRIBUTES) == expected
    assert message_bytes(body) == len(body.encode()) == 15
    # botocore sends a str blob as its UTF-8 bytes
    assert message_bytes("", {"b": {"DataType": "Binary", "BinaryValue": "é"}}) == 1 + 6 + 2


class FakeSqs:
    """Answers SendMessageBatch from a script of per-call failures; records every call."""

    def __init__(self, failures: list[dict[str, dict[str, Any]]] | None = None) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.singles: list[dict[str, Any]] = []
        self._failures = list(failures or [])
        self._lock = threading.Lock()

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        with self._lock:
            self.batches.append(Entries)
            failing = self._failures.pop(0) if self._failures else {}
        failed = [{"Id": e["Id"], **failing[e["MessageBody"]]} for e in Entries if e["MessageBody"] in failing]
        ok = [{"Id": e["Id"], "MessageId": f"id-{e['MessageBody']}"} for e in Entries
              if e["MessageBody"] not in failing]
        return {"Successful": ok, "Failed": failed}

    def send_message(self, QueueUrl: str, MessageBody: str, **fields: Any) -> dict[str, Any]:
        self.singles.append({"MessageBody": MessageBody, **fields})
        return {"MessageId": f"id-{MessageBody}"}


def test_batches_close_at_ten_entries() -> None:
    fake = FakeSqs()
    with Producer("q", client=fake, linger_seconds=60) as producer:
        futures = [producer.send(str(i)) for i in range(23)]
    assert [len(b) for b in fake.batches] == [10, 10, 3]
    assert [f.result(0) for f in futures] == [f"id-{i}" for i in range(23)]
    assert [e["Id"] for e in fake.batches[0]] == [str(i) for i in range(10)]


def test_batches_close_before_the_byte_limit_is_passed() -> None:
    fake = FakeSqs()
    with Producer("q", client=fake, linger_seconds=60, max_batch_bytes=100) as producer:
        producer.send("a" * 60)
        producer.send("b" * 40)  # exactly 100: same batch
        producer.send("c" * 1)
        producer.send("d" * 92, MessageAttributes={"k": {"DataType": "String", "StringValue": "v"}})  # 92+1+6+1
        producer.send("e" * 101)  # over any batch: alone, with SendMessage
    assert [[e["MessageBody"][0] for e in b] for b in fake.batches] == [["a", "b"], ["c"], ["d"]]
    assert [s["MessageBody"][0] for s in fake.singles] == ["e"]


def test_retries_resend_failed_entries_unchanged_and_sender_faults_are_final() -> None:
    # given a batch whose entry "x" fails twice through no fault of the sender and "bad" for the sender's fault
    transient = {"SenderFault": False, "Code": "InternalError", "Message": "try again"}
    fatal = {"SenderFault": True, "Code": "InvalidParameterValue", "Message": "no"}
    fake = FakeSqs([{"x": transient, "bad": fatal}, {"x": transient}])
    with Producer("q.fifo", client=fake, linger_seconds=60) as producer:
        x = producer.send("x", MessageGroupId="g", MessageDeduplicationId="dx")
        bad = producer.send("bad", MessageGroupId="g", MessageDeduplicationId="db")
        ok = producer.send("ok", MessageGroupId="g", MessageDeduplicationId="do")
    assert x.result(0) == "id-x" and ok.result(0) == "id-ok"
    with pytest.raises(BatchEntryError) as caught:
        bad.result(0)
    assert caught.value.code == "InvalidParameterValue" and caught.value.sender_fault
    assert [[e["MessageBody"] for e in b] for b in fake.batches] == [["x", "bad", "ok"], ["x"], ["x"]]
    assert {e["MessageDeduplicationId"] for b in fake.batches for e in b if e["MessageBody"] == "x"} == {"dx"}


def test_a_batch_limit_over_sqs_is_refused() -> None:
    with pytest.raises(ValueError, match="max_batch_bytes"):
        Producer("q", client=FakeSqs(), max_batch_bytes=MAX_BATCH_BYTES + 1, flush_at_exit=False)
    with pytest.raises(ValueError, match="max_batch_entries"):
        Producer("q", client=FakeSqs(), max_batch_entries=11, flush_at_exit=False)
