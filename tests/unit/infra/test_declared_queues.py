"""The queues file ``ferrymq up --queues`` reads: what a good file declares, and each bad entry refused in one line
that names it, with the error SQS gives for the same value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ferrymq.infra.declared_queues import QueuesFileError, parse

FILE = Path("queues.yaml")


def declared(text: str) -> list:
    return parse(text, FILE, region="eu-west-1", account="123456789012")


def test_a_good_file_declares_queues_with_attributes_dead_letter_links_and_tags_targets_first() -> None:
    queues = declared("""
queues:
  jobs:
    attributes:
      VisibilityTimeout: 60
      ReceiveMessageWaitTimeSeconds: "20"
    deadLetterQueue: {name: jobs-dlq, maxReceiveCount: 3}
    tags: {team: billing}
  jobs-dlq:
  orders.fifo:
    attributes: {ContentBasedDeduplication: true}
""")
    assert [q.name for q in queues] == ["jobs-dlq", "jobs", "orders.fifo"]
    jobs = queues[1]
    assert jobs.attributes["VisibilityTimeout"] == "60" and jobs.attributes["ReceiveMessageWaitTimeSeconds"] == "20"
    assert json.loads(jobs.attributes["RedrivePolicy"]) == {
        "deadLetterTargetArn": "arn:aws:sqs:eu-west-1:123456789012:jobs-dlq", "maxReceiveCount": 3}
    assert jobs.tags == {"team": "billing"}
    assert queues[2].attributes == {"ContentBasedDeduplication": "true", "FifoQueue": "true"}


@pytest.mark.parametrize(("text", "line"), [
    ("queues:\n  jobs:\n    attributes: {VisibilityTimeout: 43201}\n",
     "queue 'jobs': InvalidAttributeValue: Invalid value for the parameter VisibilityTimeout."),
    ("queues:\n  bad.name: {}\n",
     "queue 'bad.name': InvalidParameterValue: Can only include alphanumeric characters, hyphens, or underscores. "
     "1 to 80 in length"),
    ("queues:\n  plain:\n    attributes: {ContentBasedDeduplication: true}\n",
     "queue 'plain': InvalidAttributeName: Unknown Attribute ContentBasedDeduplication."),
    ("queues:\n  a:\n    attributes: {Colour: red}\n", "queue 'a': InvalidAttributeName: Unknown Attribute Colour."),
    ("queues:\n  a:\n    attributes: {QueueArn: x}\n", "queue 'a': InvalidAttributeName: Unknown Attribute QueueArn."),
    ("queues:\n  a:\n    deadLetterQueue: {name: b, maxReceiveCount: 0}\n  b: {}\n",
     "Reason: Invalid value for maxReceiveCount: 0, valid values are from 1 to 1000 both inclusive."),
    ("queues:\n  a:\n    deadLetterQueue: {name: b, maxReceiveCount: 3}\n",
     "queue 'a': its dead-letter queue 'b' is not declared in the file"),
    ("queues:\n  a:\n    deadLetterQueue: {name: b.fifo, maxReceiveCount: 3}\n  b.fifo: {}\n",
     "Reason: Dead-letter queue must be same type of queue as the source.."),
    ("queues:\n  a:\n    deadLetterQueue: {name: b, maxReceiveCount: 3}\n  b:\n    deadLetterQueue: {name: a, "
     "maxReceiveCount: 3}\n", "its dead-letter queues lead back to it"),
    ("queues:\n  a:\n    tags: {'aws:team': x}\n",
     "queue 'a': InvalidParameterValue: Tag keys must not start with the reserved prefix aws:"),
    ("queues:\n  a:\n    colour: red\n", "queue 'a': unknown key 'colour'"),
    ("queues:\n  a:\n    attributes: [VisibilityTimeout]\n", "queue 'a': attributes is a map"),
    ("queues:\n  a:\n    attributes: {VisibilityTimeout: {nested: 1}}\n", "attributes.VisibilityTimeout"),
    ("queues:\n  a:\n    deadLetterQueue: b\n", "deadLetterQueue needs exactly name and maxReceiveCount"),
    ("queues: [\n", "not valid YAML at line"),
    ("queues:\n  a: !!python/object/apply:os.system [echo hi]\n", "not valid YAML"),
    ("jobs: {}\n", "expected one key, queues"),
    ("", "expected one key, queues"),
])
def test_a_bad_entry_is_refused_in_one_line_naming_it(text: str, line: str) -> None:
    with pytest.raises(QueuesFileError) as refused:
        declared(text)
    message = str(refused.value)
    assert message.startswith("queues file queues.yaml: ") and "\n" not in message
    assert line in message, message
