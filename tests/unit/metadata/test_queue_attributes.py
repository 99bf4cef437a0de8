import pytest

from ferrymq import limits
from ferrymq.destinations import retention_seconds
from ferrymq.errors import InvalidAttributeName, InvalidAttributeValue, InvalidParameterValue
from ferrymq.metadata import queue_attributes as qa


def test_values_are_canonicalised() -> None:
    assert qa.check_settable({"VisibilityTimeout": " 60", "SqsManagedSseEnabled": "TRUE"}, fifo=False) == {
        "VisibilityTimeout": "60",
        "SqsManagedSseEnabled": "true",
    }


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("VisibilityTimeout", "43201"),
        ("DelaySeconds", "-1"),
        ("MessageRetentionPeriod", "59"),
        ("MaximumMessageSize", "1048577"),
        ("ReceiveMessageWaitTimeSeconds", "x"),
    ],
)
def test_out_of_range_values_are_rejected(name: str, value: str) -> None:
    with pytest.raises(InvalidAttributeValue, match=f"Invalid value for the parameter {name}."):
        qa.check_settable({name: value}, fifo=False)


@pytest.mark.parametrize("name", ["Bogus", "QueueArn", "ContentBasedDeduplication"])
def test_unknown_read_only_and_fifo_only_names_are_rejected_on_standard_queues(name: str) -> None:
    with pytest.raises(InvalidAttributeName, match=f"Unknown Attribute {name}."):
        qa.check_settable({name: "true"}, fifo=False)


def test_defaults() -> None:
    assert qa.int_value({}, "VisibilityTimeout") == 30
    assert qa.int_value({"VisibilityTimeout": "5"}, "VisibilityTimeout") == 5
    assert qa.DEFAULTS["MessageRetentionPeriod"] == "345600"


def test_fifo_queues_report_their_defaults_and_standard_queues_do_not() -> None:
    fifo = qa.reported({"FifoQueue": "true"}, fifo=True)
    assert {k: fifo[k] for k in qa.FIFO_DEFAULTS} == {
        "FifoQueue": "true",
        "ContentBasedDeduplication": "false",
        "DeduplicationScope": "queue",
        "FifoThroughputLimit": "perQueue",
    }
    assert not set(qa.FIFO_DEFAULTS) & set(qa.reported({}, fifo=False))


def test_sse_sqs_is_on_by_default_and_a_kms_key_turns_it_off() -> None:
    # given a new queue, then SSE-SQS is reported and no KMS attributes are
    standard = qa.reported(qa.combined({}, {}, fifo=False), fifo=False)
    assert standard["SqsManagedSseEnabled"] == "true"
    assert "KmsMasterKeyId" not in standard and "KmsDataKeyReusePeriodSeconds" not in standard
    # when a KMS key is chosen, then SSE-SQS goes off and the reuse period is reported with its default
    kms = qa.combined({}, qa.check_settable({"KmsMasterKeyId": "alias/aws/sqs"}, fifo=False), fifo=False)
    shown = qa.reported(kms, fifo=False)
    assert (shown["KmsMasterKeyId"], shown["KmsDataKeyReusePeriodSeconds"], shown["SqsManagedSseEnabled"]) == (
        "alias/aws/sqs", "300", "false")
    # when SSE-SQS is turned back on, then the key is dropped
    back = qa.combined(kms, {"SqsManagedSseEnabled": "true"}, fifo=False)
    assert "KmsMasterKeyId" not in back and back["SqsManagedSseEnabled"] == "true"


def test_both_kinds_of_sse_at_once_are_refused() -> None:
    wanted = qa.check_settable({"KmsMasterKeyId": "k", "SqsManagedSseEnabled": "true"}, fifo=False)
    with pytest.raises(InvalidAttributeName, match="You can use one type of server-side encryption"):
        qa.combined({}, wanted, fifo=False)


def test_an_empty_document_removes_it() -> None:
    stored = {"Policy": "{}", "RedrivePolicy": "{}", "RedriveAllowPolicy": "{}", "DelaySeconds": "1"}
    wanted = qa.check_settable({"Policy": "", "RedrivePolicy": "", "RedriveAllowPolicy": ""}, fifo=False)
    assert qa.combined(stored, wanted, fifo=False) == {"DelaySeconds": "1"}


def test_per_message_group_throughput_needs_message_group_deduplication() -> None:
    with pytest.raises(InvalidParameterValue, match="The perMessageGroupId value is allowed only when"):
        qa.combined({"FifoQueue": "true"}, {"FifoThroughputLimit": "perMessageGroupId"}, fifo=True)
    high = qa.combined({"FifoQueue": "true"},
                       {"FifoThroughputLimit": "perMessageGroupId", "DeduplicationScope": "messageGroup"}, fifo=True)
    # and a later change may not undo the pairing
    with pytest.raises(InvalidParameterValue):
        qa.combined(high, {"DeduplicationScope": "queue"}, fifo=True)


@pytest.mark.parametrize(("name", "value"), [("DeduplicationScope", "group"), ("FifoThroughputLimit", "perGroup"),
                                             ("ContentBasedDeduplication", "yes")])
def test_fifo_attribute_values_are_checked(name: str, value: str) -> None:
    with pytest.raises(InvalidAttributeValue, match=f"Invalid value for the parameter {name}."):
        qa.check_settable({name: value}, fifo=True)


def test_documents_are_checked_and_canonicalised() -> None:
    checked = qa.check_settable(
        {"RedrivePolicy": '{"maxReceiveCount": "3", "deadLetterTargetArn": "arn:aws:sqs:us-east-1:111111111111:d"}'},
        fifo=False,
    )
    assert checked == {"RedrivePolicy": '{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:111111111111:d",'
                                        '"maxReceiveCount":3}'}
    with pytest.raises(InvalidAttributeValue, match=r"Invalid value for the parameter Policy\."):
        qa.check_settable({"Policy": "{"}, fifo=False)


def test_a_repeated_create_compares_against_what_the_queue_reports() -> None:
    stored = qa.combined({}, qa.check_settable({"FifoQueue": "true"}, fifo=True), fifo=True)
    assert qa.differing(stored, {"FifoQueue": "true", "DeduplicationScope": "queue", "Policy": ""}, fifo=True) == set()
    assert qa.differing(stored, {"ContentBasedDeduplication": "true"}, fifo=True) == {"ContentBasedDeduplication"}


@pytest.mark.parametrize(
    ("name", "highest"),
    [
        ("VisibilityTimeout", limits.MAX_VISIBILITY_TIMEOUT_SECONDS),
        ("DelaySeconds", limits.MAX_DELAY_SECONDS),
        ("ReceiveMessageWaitTimeSeconds", limits.MAX_WAIT_TIME_SECONDS),
        ("MessageRetentionPeriod", limits.MAX_RETENTION_SECONDS),
        ("MaximumMessageSize", limits.MAX_MESSAGE_BYTES),
    ],
)
def test_attribute_ranges_end_at_the_shared_sqs_limits(name: str, highest: int) -> None:
    # the highest value is taken, the next one refused
    assert qa.check_settable({name: str(highest)}, fifo=False) == {name: str(highest)}
    with pytest.raises(InvalidAttributeValue):
        qa.check_settable({name: str(highest + 1)}, fifo=False)


def test_the_default_retention_is_the_one_workers_assume() -> None:
    assert qa.int_value({}, "MessageRetentionPeriod") == retention_seconds({}) == limits.DEFAULT_RETENTION_SECONDS


@pytest.mark.parametrize("name", ["SqsManagedSseEnabled", "VisibilityTimeout", "DeduplicationScope", "Policy",
                                  "FerryMQShardCount"])
def test_a_value_that_is_no_string_is_an_invalid_value_not_a_crash(name: str) -> None:
    # a query list item with sub-keys but no value of its own (Attribute.1.Value.x=) decodes to None
    with pytest.raises(InvalidAttributeValue):
        qa.check(name, None)  # type: ignore[arg-type]
