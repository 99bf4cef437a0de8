/**
 * Actions on a queue that does not exist: the SDK must raise its typed QueueDoesNotExist exception.
 *
 * argv: a queue name that no queue has, and the URL such a queue would have.
 */
import { GetQueueUrlCommand, QueueDoesNotExist, SendMessageCommand } from "@aws-sdk/client-sqs";

import { argument, describeError, runScenario } from "./lib/harness.mjs";

async function failure(call) {
  try {
    await call();
  } catch (error) {
    return { ...describeError(error), isQueueDoesNotExist: error instanceof QueueDoesNotExist };
  }
  return null;
}

runScenario(async (client) => {
  const queueName = argument(0, "missing queue name");
  const queueUrl = argument(1, "missing queue URL");
  return {
    getQueueUrl: await failure(() => client.send(new GetQueueUrlCommand({ QueueName: queueName }))),
    sendMessage: await failure(() =>
      client.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: "to nowhere" })),
    ),
  };
});
