/**
 * Redrive to a dead-letter queue: a source queue with maxReceiveCount 1 and a visibility timeout of one
 * second; a message received once and never deleted must, on the next receive after its visibility runs
 * out, land in the dead-letter queue carrying DeadLetterQueueSourceArn.
 *
 * argv: source queue name, dead-letter queue name.
 */
import {
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ListDeadLetterSourceQueuesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from "@aws-sdk/client-sqs";

import { attributesForJson } from "./lib/digests.mjs";
import { argument, outcome, runScenario } from "./lib/harness.mjs";
import { createRedrivePair } from "./lib/queues.mjs";

const BODY = "received once, never deleted";
const ATTRIBUTES = { origin: { DataType: "String", StringValue: "dead-letter scenario" } };
const REDRIVE_SECONDS = 20;

async function receive(client, queueUrl, extra) {
  const { Messages: messages = [] } = await client.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 10,
      MessageAttributeNames: ["All"],
      MessageSystemAttributeNames: ["All"],
      ...extra,
    }),
  );
  return messages;
}

function describe(message) {
  return {
    messageId: message.MessageId,
    body: message.Body,
    attributes: message.Attributes ?? {},
    messageAttributes: attributesForJson(message.MessageAttributes),
  };
}

runScenario(async (client) => {
  const sourceName = argument(0, "source queue name");
  const deadLetterName = argument(1, "dead-letter queue name");
  const queues = await createRedrivePair(client, sourceName, deadLetterName, {
    maxReceiveCount: 1,
    visibilityTimeout: 1,
  });
  const { Attributes: sourceAttributes } = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: queues.sourceUrl, AttributeNames: ["RedrivePolicy"] }),
  );

  const sent = await client.send(
    new SendMessageCommand({ QueueUrl: queues.sourceUrl, MessageBody: BODY, MessageAttributes: ATTRIBUTES }),
  );
  // The one receive maxReceiveCount allows; the message is left to become visible again.
  const firstReceive = (await receive(client, queues.sourceUrl, { WaitTimeSeconds: 2 })).map(describe);

  // Receiving from the source after the visibility timeout is what moves the message; keep both sides polled
  // until it shows up in the dead-letter queue.
  const sourceAfterExpiry = [];
  let deadLettered = [];
  const deadline = Date.now() + REDRIVE_SECONDS * 1000;
  while (deadLettered.length === 0 && Date.now() < deadline) {
    sourceAfterExpiry.push(...(await receive(client, queues.sourceUrl, { WaitTimeSeconds: 1 })).map(describe));
    deadLettered = await receive(client, queues.deadLetterUrl, { WaitTimeSeconds: 1, VisibilityTimeout: 30 });
  }
  for (const message of deadLettered) {
    await client.send(
      new DeleteMessageCommand({ QueueUrl: queues.deadLetterUrl, ReceiptHandle: message.ReceiptHandle }),
    );
  }

  const sourceQueues = await outcome(async () => {
    const { queueUrls = [] } = await client.send(
      new ListDeadLetterSourceQueuesCommand({ QueueUrl: queues.deadLetterUrl }),
    );
    return queueUrls;
  });

  await client.send(new DeleteQueueCommand({ QueueUrl: queues.sourceUrl }));
  await client.send(new DeleteQueueCommand({ QueueUrl: queues.deadLetterUrl }));
  return {
    ...queues,
    redrivePolicy: sourceAttributes?.RedrivePolicy ?? null,
    sent: { messageId: sent.MessageId, body: BODY },
    firstReceive,
    sourceAfterExpiry,
    deadLettered: deadLettered.map(describe),
    deadLetterSourceQueues: sourceQueues,
  };
});
