/**
 * A FIFO producer and consumer: messages in two groups, a repeated body that content-based deduplication
 * must drop, and a consumer that receives, records and deletes until the queue is drained.
 *
 * argv: queue name (ending in .fifo). Prints what each send returned and every receive in order.
 */
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from "@aws-sdk/client-sqs";

import { argument, runScenario } from "./lib/harness.mjs";

// Interleaved on purpose: the order within each group must survive, whatever the order across groups.
const SENDS = [
  { group: "group-a", body: "a-1" },
  { group: "group-b", body: "b-1" },
  { group: "group-a", body: "a-2" },
  { group: "group-b", body: "b-2" },
  { group: "group-a", body: "a-3" },
];
const DUPLICATE = SENDS[0];
const DRAIN_SECONDS = 20;

async function send(client, queueUrl, { group, body }) {
  const result = await client.send(
    new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body, MessageGroupId: group }),
  );
  return { group, body, messageId: result.MessageId, sequenceNumber: result.SequenceNumber ?? null };
}

async function receiveAndDelete(client, queueUrl, waitTimeSeconds) {
  const { Messages: messages = [] } = await client.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: waitTimeSeconds,
      VisibilityTimeout: 30,
      MessageSystemAttributeNames: ["All"],
    }),
  );
  if (messages.length > 0) {
    await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: messages.map((message, index) => ({ Id: `m${index}`, ReceiptHandle: message.ReceiptHandle })),
      }),
    );
  }
  return messages.map((message) => ({
    body: message.Body,
    messageId: message.MessageId,
    group: message.Attributes?.MessageGroupId ?? null,
    sequenceNumber: message.Attributes?.SequenceNumber ?? null,
    deduplicationId: message.Attributes?.MessageDeduplicationId ?? null,
  }));
}

runScenario(async (client) => {
  const queueName = argument(0, "FIFO queue name");
  const { QueueUrl: queueUrl } = await client.send(
    new CreateQueueCommand({
      QueueName: queueName,
      Attributes: { FifoQueue: "true", ContentBasedDeduplication: "true" },
    }),
  );

  const sent = [];
  for (const message of SENDS) {
    sent.push(await send(client, queueUrl, message));
  }
  const duplicate = await send(client, queueUrl, DUPLICATE);

  // Each receive is one batch; group order must hold across batches too.
  const receives = [];
  let count = 0;
  const deadline = Date.now() + DRAIN_SECONDS * 1000;
  while (count < SENDS.length && Date.now() < deadline) {
    const batch = await receiveAndDelete(client, queueUrl, 1);
    if (batch.length > 0) {
      receives.push(batch);
      count += batch.length;
    }
  }
  // Everything sent once has been deleted: whatever still arrives is a duplicate that got through.
  const afterDrain = await receiveAndDelete(client, queueUrl, 1);

  await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
  return { queueUrl, sent, duplicate, receives, afterDrain };
});
