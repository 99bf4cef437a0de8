/**
 * A standard queue's whole life through the SDK: create, send with attributes of every type, receive,
 * change visibility, receive again, delete the message, delete the queue.
 *
 * argv: queue name. Prints the send and receive results next to the digests computed here.
 */
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ListQueuesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from "@aws-sdk/client-sqs";

import { argument, runScenario } from "./lib/harness.mjs";
import { attributesForJson, bodyMd5, messageAttributesMd5 } from "./lib/digests.mjs";

const BODY = 'line1\r\nline2 <&> "quoted" é \u4e2d \u{1f600}';
const ATTRIBUTES = {
  text: { DataType: "String", StringValue: "v & <x> \u00e9" },
  count: { DataType: "Number", StringValue: "12.5" },
  blob: { DataType: "Binary", BinaryValue: Uint8Array.from([0, 255, 98, 105, 110]) },
  kind: { DataType: "String.custom", StringValue: "custom" },
};

function describeMessage(message) {
  return {
    messageId: message.MessageId,
    body: message.Body,
    md5OfBody: message.MD5OfBody,
    md5OfMessageAttributes: message.MD5OfMessageAttributes ?? null,
    messageAttributes: attributesForJson(message.MessageAttributes),
    attributes: message.Attributes ?? {},
    receiptHandle: message.ReceiptHandle,
  };
}

async function receiveOne(client, queueUrl, extra) {
  const { Messages: messages = [] } = await client.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MessageAttributeNames: ["All"],
      MessageSystemAttributeNames: ["All"],
      WaitTimeSeconds: 2,
      ...extra,
    }),
  );
  return messages.map(describeMessage);
}

runScenario(async (client) => {
  const queueName = argument(0, "queue name");
  const { QueueUrl: queueUrl } = await client.send(
    new CreateQueueCommand({ QueueName: queueName, Attributes: { VisibilityTimeout: "30" } }),
  );
  const { Attributes: queueAttributes } = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["All"] }),
  );

  const sent = await client.send(
    new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: BODY, MessageAttributes: ATTRIBUTES }),
  );
  const firstReceive = await receiveOne(client, queueUrl, { VisibilityTimeout: 600 });
  // Hidden for ten minutes, so a receive now must come back empty.
  const whileInFlight = await receiveOne(client, queueUrl, { WaitTimeSeconds: 0 });

  let secondReceive = [];
  if (firstReceive.length === 1) {
    await client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: queueUrl,
        ReceiptHandle: firstReceive[0].receiptHandle,
        VisibilityTimeout: 0,
      }),
    );
    secondReceive = await receiveOne(client, queueUrl, { VisibilityTimeout: 600 });
  }

  let afterDelete = null;
  if (secondReceive.length === 1) {
    await client.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: secondReceive[0].receiptHandle }));
    afterDelete = await receiveOne(client, queueUrl, { WaitTimeSeconds: 0, VisibilityTimeout: 0 });
  }

  await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
  const { QueueUrls: listedAfterDelete = [] } = await client.send(
    new ListQueuesCommand({ QueueNamePrefix: queueName }),
  );

  return {
    queueUrl,
    queueArn: queueAttributes.QueueArn,
    expected: {
      body: BODY,
      md5OfBody: bodyMd5(BODY),
      md5OfMessageAttributes: messageAttributesMd5(ATTRIBUTES),
      messageAttributes: attributesForJson(ATTRIBUTES),
    },
    sent: {
      messageId: sent.MessageId,
      md5OfMessageBody: sent.MD5OfMessageBody,
      md5OfMessageAttributes: sent.MD5OfMessageAttributes,
      httpStatusCode: sent.$metadata.httpStatusCode,
    },
    firstReceive,
    whileInFlight,
    secondReceive,
    afterDelete,
    listedAfterDelete,
  };
});
