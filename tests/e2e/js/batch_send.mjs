/**
 * SendMessageBatch with one bad entry among good ones: the call succeeds, the bad entry is listed under
 * Failed, and only the good entries can be received.
 *
 * argv: queue name. The SDK checks each successful entry's MD5OfMessageBody against the body it sent.
 */
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
} from "@aws-sdk/client-sqs";

import { argument, runScenario } from "./lib/harness.mjs";
import { bodyMd5, messageAttributesMd5 } from "./lib/digests.mjs";

const ATTRIBUTES = { origin: { DataType: "String", StringValue: "batch" } };
const ENTRIES = [
  { Id: "first", MessageBody: "first body" },
  // U+0000 is outside the characters SQS allows in a message.
  { Id: "invalid", MessageBody: "bad \u0000 character" },
  { Id: "third", MessageBody: "third body", MessageAttributes: ATTRIBUTES },
];

runScenario(async (client) => {
  const queueName = argument(0, "queue name");
  const { QueueUrl: queueUrl } = await client.send(new CreateQueueCommand({ QueueName: queueName }));
  const result = await client.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: ENTRIES }));

  // Two messages at most can be there; a few receives are enough to see every one of them.
  const received = [];
  for (let attempt = 0; attempt < 5 && received.length < 3; attempt += 1) {
    const { Messages: messages = [] } = await client.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    received.push(...messages);
  }
  if (received.length > 0) {
    await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: received.map((message, index) => ({ Id: `m${index}`, ReceiptHandle: message.ReceiptHandle })),
      }),
    );
  }
  await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));

  return {
    expected: {
      md5OfBody: Object.fromEntries(ENTRIES.map((entry) => [entry.Id, bodyMd5(entry.MessageBody)])),
      md5OfMessageAttributes: { third: messageAttributesMd5(ATTRIBUTES) },
    },
    successful: (result.Successful ?? []).map((entry) => ({
      id: entry.Id,
      messageId: entry.MessageId,
      md5OfMessageBody: entry.MD5OfMessageBody,
      md5OfMessageAttributes: entry.MD5OfMessageAttributes ?? null,
    })),
    failed: (result.Failed ?? []).map((entry) => ({
      id: entry.Id,
      code: entry.Code,
      senderFault: entry.SenderFault,
      message: entry.Message ?? null,
    })),
    receivedBodies: received.map((message) => message.Body),
  };
});
