/** Queue set-ups that more than one scenario needs. */
import { CreateQueueCommand, GetQueueAttributesCommand } from "@aws-sdk/client-sqs";

export async function queueArn(client, queueUrl) {
  const { Attributes: attributes } = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
  );
  return attributes.QueueArn;
}

/**
 * A dead-letter queue and a source queue whose RedrivePolicy sends a message there once it has been
 * received ``maxReceiveCount`` times. Returns both URLs and ARNs.
 */
export async function createRedrivePair(client, sourceName, deadLetterName, { maxReceiveCount, visibilityTimeout }) {
  const { QueueUrl: deadLetterUrl } = await client.send(new CreateQueueCommand({ QueueName: deadLetterName }));
  const deadLetterArn = await queueArn(client, deadLetterUrl);
  const { QueueUrl: sourceUrl } = await client.send(
    new CreateQueueCommand({
      QueueName: sourceName,
      Attributes: {
        VisibilityTimeout: String(visibilityTimeout),
        RedrivePolicy: JSON.stringify({ deadLetterTargetArn: deadLetterArn, maxReceiveCount }),
      },
    }),
  );
  return { sourceUrl, sourceArn: await queueArn(client, sourceUrl), deadLetterUrl, deadLetterArn };
}
