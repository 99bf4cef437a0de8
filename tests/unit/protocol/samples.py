"""Inputs and outputs of SQS actions in their JSON shape, shared by the request and response tests."""

from __future__ import annotations

from typing import Any

QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/000000000000/q1"
TRICKY_TEXT = "a&b<c>d\"e'f\r\ng\r\th  \u00e9\u4e2d\U0001f600"

# Inputs every protocol can carry (the query model lacks MessageSystemAttributeNames, tested separately).
REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("ListQueues", {}),
    ("ListQueues", {"QueueNamePrefix": "q", "MaxResults": 10, "NextToken": "tok"}),
    ("CreateQueue", {
        "QueueName": "q1.fifo",
        "Attributes": {"FifoQueue": "true", "VisibilityTimeout": "45", "Policy": '{"a": [1, 2]}'},
        "tags": {"team": "ferry", "empty": ""},
    }),
    ("GetQueueUrl", {"QueueName": "q1", "QueueOwnerAWSAccountId": "000000000000"}),
    ("GetQueueAttributes", {"QueueUrl": QUEUE_URL, "AttributeNames": ["All"]}),
    ("GetQueueAttributes", {"QueueUrl": QUEUE_URL, "AttributeNames": []}),
    ("SetQueueAttributes", {"QueueUrl": QUEUE_URL, "Attributes": {"DelaySeconds": "5", "RedrivePolicy": "{}"}}),
    ("SendMessage", {"QueueUrl": QUEUE_URL, "MessageBody": "hello"}),
    ("SendMessage", {
        "QueueUrl": QUEUE_URL,
        "MessageBody": TRICKY_TEXT,
        "DelaySeconds": 7,
        "MessageAttributes": {
            "s": {"DataType": "String", "StringValue": "v&<>"},
            "n": {"DataType": "Number.int", "StringValue": "-12.5"},
            "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe\xff"},
            "dotted.name": {"DataType": "String.custom", "StringValue": "x"},
        },
        "MessageSystemAttributes": {"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-5e-abc"}},
        "MessageDeduplicationId": "d1",
        "MessageGroupId": "g1",
    }),
    ("SendMessageBatch", {
        "QueueUrl": QUEUE_URL,
        "Entries": [
            {"Id": "a", "MessageBody": "one"},
            {
                "Id": "b",
                "MessageBody": "two",
                "DelaySeconds": 0,
                "MessageAttributes": {"k": {"DataType": "Binary", "BinaryValue": b"bin"}},
                "MessageSystemAttributes": {"AWSTraceHeader": {"DataType": "String", "StringValue": "t"}},
            },
        ],
    }),
    ("ReceiveMessage", {
        "QueueUrl": QUEUE_URL,
        "AttributeNames": ["SentTimestamp", "ApproximateReceiveCount"],
        "MessageAttributeNames": ["All", "prefix.*"],
        "MaxNumberOfMessages": 10,
        "VisibilityTimeout": 0,
        "WaitTimeSeconds": 20,
        "ReceiveRequestAttemptId": "r1",
    }),
    ("DeleteMessage", {"QueueUrl": QUEUE_URL, "ReceiptHandle": "rh+/="}),
    ("DeleteMessageBatch", {"QueueUrl": QUEUE_URL, "Entries": [{"Id": "1", "ReceiptHandle": "a"},
                                                                {"Id": "2", "ReceiptHandle": "b"}]}),
    ("ChangeMessageVisibility", {"QueueUrl": QUEUE_URL, "ReceiptHandle": "rh", "VisibilityTimeout": 43200}),
    ("ChangeMessageVisibilityBatch", {"QueueUrl": QUEUE_URL, "Entries": [
        {"Id": "1", "ReceiptHandle": "a", "VisibilityTimeout": 3},
        {"Id": "2", "ReceiptHandle": "b"},
    ]}),
    ("PurgeQueue", {"QueueUrl": QUEUE_URL}),
    ("DeleteQueue", {"QueueUrl": QUEUE_URL}),
    ("TagQueue", {"QueueUrl": QUEUE_URL, "Tags": {"a": "1", "b": "2"}}),
    ("UntagQueue", {"QueueUrl": QUEUE_URL, "TagKeys": ["a", "b"]}),
    ("ListQueueTags", {"QueueUrl": QUEUE_URL}),
    ("AddPermission", {"QueueUrl": QUEUE_URL, "Label": "l", "AWSAccountIds": ["111111111111", "222222222222"],
                       "Actions": ["SendMessage", "ReceiveMessage"]}),
    ("RemovePermission", {"QueueUrl": QUEUE_URL, "Label": "l"}),
    ("ListDeadLetterSourceQueues", {"QueueUrl": QUEUE_URL, "MaxResults": 5}),
    ("StartMessageMoveTask", {"SourceArn": "arn:aws:sqs:us-east-1:000000000000:dlq",
                              "MaxNumberOfMessagesPerSecond": 50}),
    ("CancelMessageMoveTask", {"TaskHandle": "h"}),
    ("ListMessageMoveTasks", {"SourceArn": "arn:aws:sqs:us-east-1:000000000000:dlq", "MaxResults": 3}),
]

# Outputs as an action handler returns them; each renders in both protocols.
RESULTS: list[tuple[str, dict[str, Any]]] = [
    ("CreateQueue", {"QueueUrl": QUEUE_URL}),
    ("GetQueueUrl", {"QueueUrl": QUEUE_URL}),
    ("ListQueues", {"QueueUrls": [QUEUE_URL, QUEUE_URL + "2"], "NextToken": "n"}),
    ("ListQueues", {}),
    ("GetQueueAttributes", {"Attributes": {"VisibilityTimeout": "30", "Policy": '{"x": "<&>"}'}}),
    ("SendMessage", {"MessageId": "m1", "MD5OfMessageBody": "0" * 32, "MD5OfMessageAttributes": "1" * 32,
                     "MD5OfMessageSystemAttributes": "2" * 32, "SequenceNumber": "100"}),
    ("SendMessageBatch", {
        "Successful": [{"Id": "a", "MessageId": "m1", "MD5OfMessageBody": "0" * 32}],
        "Failed": [{"Id": "b", "SenderFault": True, "Code": "InvalidParameterValue", "Message": "bad <value>"}],
    }),
    ("ReceiveMessage", {"Messages": [
        {
            "MessageId": "m1",
            "ReceiptHandle": "rh1",
            "MD5OfBody": "0" * 32,
            "Body": TRICKY_TEXT,
            "Attributes": {"SentTimestamp": "1700000000000", "ApproximateReceiveCount": "1"},
            "MD5OfMessageAttributes": "1" * 32,
            "MessageAttributes": {
                "s": {"StringValue": "v", "DataType": "String"},
                "b": {"BinaryValue": b"\x00\xff", "DataType": "Binary"},
            },
        },
        {"MessageId": "m2", "ReceiptHandle": "rh2", "MD5OfBody": "2" * 32, "Body": ""},
    ]}),
    ("DeleteMessageBatch", {"Successful": [{"Id": "1"}, {"Id": "2"}], "Failed": []}),
    ("ChangeMessageVisibilityBatch", {"Successful": [], "Failed": [
        {"Id": "1", "SenderFault": False, "Code": "InternalError"},
    ]}),
    ("ListQueueTags", {"Tags": {"a": "1", "b": ""}}),
    ("ListDeadLetterSourceQueues", {"queueUrls": [QUEUE_URL], "NextToken": "t"}),
    ("StartMessageMoveTask", {"TaskHandle": "h"}),
    ("CancelMessageMoveTask", {"ApproximateNumberOfMessagesMoved": 2**40}),
    ("ListMessageMoveTasks", {"Results": [
        {"TaskHandle": "h", "Status": "RUNNING", "SourceArn": "arn:s", "DestinationArn": "arn:d",
         "MaxNumberOfMessagesPerSecond": 10, "ApproximateNumberOfMessagesMoved": 1,
         "ApproximateNumberOfMessagesToMove": 5, "StartedTimestamp": 1700000000000},
    ]}),
    ("DeleteMessage", {}),
    ("PurgeQueue", {}),
]
