"""What the front end records for a request: fields from the request, its parameters, result and error."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.clock import ManualClock
from ferrymq.errors import InvalidClientTokenId, QueueDoesNotExist
from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.usage import UsageRecorder, access_key_of
from ferrymq.usage import schema
from ferrymq.usage.writer import UsageWriter

URL = "http://127.0.0.1:9324/111122223333/jobs.fifo"
AUTH = ("AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/20261122/us-east-1/sqs/aws4_request, "
        "SignedHeaders=host, Signature=abc")


class Collected:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def put(self, key: str, body: bytes) -> None:
        self.bodies.append(body)


def _recorder(tmp_path: Path, queues: dict[tuple[str, str], QueueRecord] | None = None) -> tuple[UsageRecorder,
                                                                                                  UsageWriter]:
    recorders: list[UsageRecorder] = []
    writer = UsageWriter(Collected(), tmp_path, "fe-1", clock=ManualClock(), finish=lambda raw: recorders[0].build(raw))
    lookup = (queues or {}).get
    recorders.append(UsageRecorder(writer, region="us-east-1", queue_lookup=lambda a, n, r: lookup((a, n, r))))
    return recorders[0], writer


def _request(action: str, params: dict, **headers: str) -> HttpRequest:
    return HttpRequest("POST", "/", "", {"authorization": AUTH, "x-amz-target": f"AmazonSQS.{action}",
                                         "content-type": "application/x-amz-json-1.0", **headers},
                       json.dumps(params).encode(), peer="10.0.0.9")


def _only(writer: UsageWriter) -> dict:
    writer.flush()
    sink = writer._sink
    assert isinstance(sink, Collected)
    records = [orjson.loads(line) for body in sink.bodies for line in gzip.decompress(body).splitlines()]
    assert len(records) == 1
    assert schema.problems(records[0]) == []
    return records[0]


def test_a_successful_batch_send_is_recorded_with_its_units(tmp_path: Path) -> None:
    kms_queue = QueueRecord("111122223333", "jobs.fifo", "q1", 0, attributes={"KmsMasterKeyId": "alias/k"})
    recorder, writer = _recorder(tmp_path, {("111122223333", "jobs.fifo", "us-east-1"): kms_queue})
    params = {"QueueUrl": URL, "Entries": [{"Id": str(i), "MessageBody": "x" * 30_000} for i in range(5)]}

    recorder.record(_request("SendMessageBatch", params, **{"user-agent": "boto3/1.44"}), request_id="r1",
                    arrived=1_763_854_867.5, latency=0.0021, account="111122223333", action="SendMessageBatch",
                    params=params, path_queue_url=None, result={"Successful": [{}] * 5, "Failed": []}, error=None,
                    status=200, region="us-east-1")

    record = _only(writer)
    assert record["ts"] == "2025-11-22T23:41:07.500Z"
    assert record["queue_arn"] == "arn:aws:sqs:us-east-1:111122223333:jobs.fifo"
    assert (record["queue_type"], record["sse"], record["outcome"]) == ("fifo", "kms", "Success")
    assert (record["messages_in"], record["bytes_in"], record["billable_units"]) == (5, 150_000, 3)
    assert (record["access_key_id"], record["source_ip"], record["user_agent"]) == ("AKIAEXAMPLE", "10.0.0.9",
                                                                                   "boto3/1.44")
    assert record["latency_ms"] == 2.1


def test_a_refused_signature_is_recorded_with_the_action_it_asked_for(tmp_path: Path) -> None:
    recorder, writer = _recorder(tmp_path)
    params = {"QueueUrl": URL, "MessageBody": "hi"}

    recorder.record(_request("SendMessage", params, **{"x-forwarded-for": "203.0.113.7, 10.0.0.1"}),
                    request_id="r2", arrived=1_763_854_867.0, latency=0.001, account=None, action=None, params=None,
                    path_queue_url=None, result=None, error=InvalidClientTokenId(), status=403)

    record = _only(writer)
    assert (record["account"], record["action"], record["outcome"]) == (None, "SendMessage", "InvalidClientTokenId")
    assert (record["http_status"], record["source_ip"], record["messages_in"]) == (403, "203.0.113.7", 1)


def test_an_error_records_the_query_code_and_no_output(tmp_path: Path) -> None:
    recorder, writer = _recorder(tmp_path)
    params = {"QueueUrl": "http://h/111122223333/gone"}

    recorder.record(_request("ReceiveMessage", params), request_id="r3", arrived=1_763_854_867.0, latency=0.0,
                    account="111122223333", action="ReceiveMessage", params=params, path_queue_url=None,
                    result={"Messages": [{"Body": "stale"}]}, error=QueueDoesNotExist(), status=400)

    record = _only(writer)
    assert record["outcome"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert (record["messages_out"], record["queue_type"], record["sse"]) == (0, "standard", "none")


def test_a_recording_bug_never_reaches_the_request(tmp_path: Path) -> None:
    def broken(account: str, name: str, region: str | None) -> QueueRecord:
        raise RuntimeError("cache bug")

    writer = UsageWriter(Collected(), tmp_path, "fe-1", clock=ManualClock())
    recorder = UsageRecorder(writer, region="us-east-1", queue_lookup=broken)
    params = {"QueueUrl": URL}

    recorder.record(_request("GetQueueAttributes", params), request_id="r4", arrived=1.0, latency=0.0,
                    account="1", action="GetQueueAttributes", params=params, path_queue_url=None, result={},
                    error=None, status=200)

    assert writer.pending() == 0


def test_a_queue_url_naming_a_region_records_that_region(tmp_path: Path) -> None:
    recorder, writer = _recorder(tmp_path)
    params = {"QueueUrl": "http://localhost:9324/queue/eu-west-1/111122223333/jobs"}

    recorder.record(_request("DeleteQueue", params), request_id="r5", arrived=1.0, latency=0.0,
                    account="111122223333", action="DeleteQueue", params=params, path_queue_url=None, result={},
                    error=None, status=200)

    assert _only(writer)["queue_arn"] == "arn:aws:sqs:eu-west-1:111122223333:jobs"


def test_access_key_from_header_or_presigned_query() -> None:
    assert access_key_of(HttpRequest("GET", "/", "", {"authorization": AUTH}, b"")) == "AKIAEXAMPLE"
    presigned = "Action=ListQueues&X-Amz-Credential=AKIAQ%2F20261122%2Fus-east-1%2Fsqs%2Faws4_request"
    assert access_key_of(HttpRequest("GET", "/", presigned, {}, b"")) == "AKIAQ"
    assert access_key_of(HttpRequest("GET", "/", "", {}, b"")) is None


def test_the_kms_calls_a_request_made_are_recorded_once_with_the_queues_sse_mode(tmp_path: Path) -> None:
    # given a queue with default attributes (SSE-SQS) and a request whose encryption made three KMS calls
    import contextvars

    from ferrymq.frontend.encryption import _count, start_metering

    queue = QueueRecord("111122223333", "jobs.fifo", "q1", 0, attributes={})
    recorder, writer = _recorder(tmp_path, {("111122223333", "jobs.fifo", "us-east-1"): queue})
    params = {"QueueUrl": URL, "MessageBody": "hi", "MessageGroupId": "g"}

    def request() -> None:
        start_metering()
        _count(3)
        recorder.record(_request("SendMessage", params), request_id="r1", arrived=1_763_854_867.5, latency=0.001,
                        account="111122223333", action="SendMessage", params=params, path_queue_url=None,
                        result={"MessageId": "m"}, error=None, status=200, region="us-east-1")
        # a second record in the same context (the next request on a connection) counts none of them again
        recorder.record(_request("SendMessage", params), request_id="r2", arrived=1_763_854_867.5, latency=0.001,
                        account="111122223333", action="SendMessage", params=params, path_queue_url=None,
                        result={"MessageId": "m"}, error=None, status=200, region="us-east-1")

    contextvars.copy_context().run(request)
    writer.flush()
    sink = writer._sink
    assert isinstance(sink, Collected)
    records = {r["request_id"]: r for body in sink.bodies
               for r in map(orjson.loads, gzip.decompress(body).splitlines())}
    # then the first record has the three calls and the queue's mode, the second none
    assert (records["r1"]["kms_calls"], records["r1"]["sse"]) == (3, "sqs")
    assert records["r2"]["kms_calls"] == 0
