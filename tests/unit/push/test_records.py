"""Lambda's SQS records and the rules of a target's answer (ReportBatchItemFailures, FIFO groups)."""

from __future__ import annotations

import orjson
import pytest

from ferrymq.push.records import BatchFailed, failed_ids, record, split
from ferrymq.push.signature import signed_headers, verify


def rec(message_id: str, group: str | None = None) -> dict:
    attributes = {"MessageGroupId": group} if group else {}
    return record({"MessageId": message_id, "ReceiptHandle": "h" + message_id, "Body": "b", "MD5OfBody": "m",
                   "Attributes": attributes}, "arn:aws:sqs:us-east-1:000000000000:q", "us-east-1")


BATCH = [rec("a"), rec("b"), rec("c")]


@pytest.mark.parametrize("answer", [None, {}, {"batchItemFailures": []}, {"batchItemFailures": None}])
def test_empty_answers_are_full_success(answer: object) -> None:
    assert failed_ids(answer, BATCH, report_failures=True, fifo=False) == set()


def test_listed_messages_stay_and_without_the_setting_the_answer_is_ignored() -> None:
    answer = {"batchItemFailures": [{"itemIdentifier": "b"}]}
    assert failed_ids(answer, BATCH, report_failures=True, fifo=False) == {"b"}
    assert failed_ids({"batchItemFailures": "nonsense"}, BATCH, report_failures=False, fifo=False) == set()


@pytest.mark.parametrize("answer", [
    [], "ok", 7, {"batchItemFailures": "b"}, {"batchItemFailures": [{"itemIdentifier": ""}]},
    {"batchItemFailures": [{"itemIdentifier": None}]}, {"batchItemFailures": [{"id": "b"}]},
    {"batchItemFailures": [{"itemIdentifier": "zzz"}]}, {"batchItemFailures": ["b"]},
])
def test_bad_answers_fail_the_whole_batch(answer: object) -> None:
    with pytest.raises(BatchFailed):
        failed_ids(answer, BATCH, report_failures=True, fifo=False)


def test_a_fifo_group_stops_at_its_first_failure() -> None:
    batch = [rec("1", "g"), rec("2", "h"), rec("3", "g"), rec("4", "g"), rec("5", "h")]
    assert failed_ids({"batchItemFailures": [{"itemIdentifier": "3"}]}, batch, report_failures=True,
                      fifo=True) == {"3", "4"}


def test_signatures_bind_secret_timestamp_and_body() -> None:
    headers = signed_headers("s3cret", 1_700_000_000, b"{}")
    assert verify("s3cret", headers, b"{}", 1_700_000_100)
    assert not verify("s3cret", headers, b"{} ", 1_700_000_100)
    assert not verify("other", headers, b"{}", 1_700_000_100)
    assert not verify("s3cret", headers, b"{}", 1_700_000_000 + 301)
    assert not verify("s3cret", {**headers, "X-FerryMQ-Timestamp": "1700000001"}, b"{}", 1_700_000_000)
    assert not verify("s3cret", {"X-FerryMQ-Timestamp": "-1", "X-FerryMQ-Signature": "v1=00"}, b"{}", 0)
    assert not verify("s3cret", {}, b"{}", 0)


def test_batches_are_cut_into_runs_within_the_payload_limit_in_order() -> None:
    batch = [rec(str(i)) for i in range(10)]
    one = len(orjson.dumps(batch[0])) + 1
    runs = split(batch, limit=14 + 3 * one)
    assert [len(r) for r in runs] == [3, 3, 3, 1]
    assert [r["messageId"] for run in runs for r in run] == [str(i) for i in range(10)]
    assert all(len(orjson.dumps({"Records": run})) <= 14 + 3 * one for run in runs)
    assert split(batch) == [batch]
    assert [len(r) for r in split(batch, limit=1)] == [1] * 10
