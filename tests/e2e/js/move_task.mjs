/**
 * A message move task from a dead-letter queue back to its source queue: StartMessageMoveTask, then
 * ListMessageMoveTasks until the task has finished, then the messages are in the source queue.
 *
 * argv: source queue name, dead-letter queue name. The messages are sent straight to the dead-letter
 * queue, so this scenario needs no redrive to have happened.
 */
import {
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  ListMessageMoveTasksCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  StartMessageMoveTaskCommand,
} from "@aws-sdk/client-sqs";

import { argument, outcome, runScenario } from "./lib/harness.mjs";
import { createRedrivePair } from "./lib/queues.mjs";

const BODIES = ["moved-1", "moved-2", "moved-3"];
const FINISHED = new Set(["COMPLETED", "FAILED", "CANCELLED"]);
const TASK_SECONDS = 30;
const RECEIVE_SECONDS = 15;

function describeTask(task) {
  return {
    status: task.Status,
    sourceArn: task.SourceArn,
    destinationArn: task.DestinationArn ?? null,
    approximateNumberOfMessagesMoved: task.ApproximateNumberOfMessagesMoved ?? null,
    approximateNumberOfMessagesToMove: task.ApproximateNumberOfMessagesToMove ?? null,
    startedTimestamp: task.StartedTimestamp ?? null,
    failureReason: task.FailureReason ?? null,
  };
}

async function drain(client, queueUrl, expected, seconds) {
  const bodies = [];
  const deadline = Date.now() + seconds * 1000;
  while (bodies.length < expected && Date.now() < deadline) {
    const { Messages: messages = [] } = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        VisibilityTimeout: 30,
      }),
    );
    if (messages.length > 0) {
      bodies.push(...messages.map((message) => message.Body));
      await client.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: messages.map((message, index) => ({ Id: `m${index}`, ReceiptHandle: message.ReceiptHandle })),
        }),
      );
    }
  }
  return bodies;
}

runScenario(async (client) => {
  const sourceName = argument(0, "source queue name");
  const deadLetterName = argument(1, "dead-letter queue name");
  const queues = await createRedrivePair(client, sourceName, deadLetterName, {
    maxReceiveCount: 3,
    visibilityTimeout: 30,
  });
  await client.send(
    new SendMessageBatchCommand({
      QueueUrl: queues.deadLetterUrl,
      Entries: BODIES.map((body, index) => ({ Id: `e${index}`, MessageBody: body })),
    }),
  );

  const started = await client.send(
    new StartMessageMoveTaskCommand({ SourceArn: queues.deadLetterArn, DestinationArn: queues.sourceArn }),
  );

  const statusesSeen = [];
  let latest = null;
  const deadline = Date.now() + TASK_SECONDS * 1000;
  while (Date.now() < deadline) {
    const { Results: results = [] } = await client.send(
      new ListMessageMoveTasksCommand({ SourceArn: queues.deadLetterArn, MaxResults: 10 }),
    );
    // The most recent task comes first.
    latest = results.length > 0 ? describeTask(results[0]) : null;
    if (latest && statusesSeen.at(-1) !== latest.status) {
      statusesSeen.push(latest.status);
    }
    if (latest && FINISHED.has(latest.status)) {
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }

  const inSource = await drain(client, queues.sourceUrl, BODIES.length, RECEIVE_SECONDS);
  const leftInDeadLetter = await drain(client, queues.deadLetterUrl, BODIES.length, 1);
  const afterCompletion = await outcome(async () => {
    const { Results: results = [] } = await client.send(
      new ListMessageMoveTasksCommand({ SourceArn: queues.deadLetterArn }),
    );
    return results.map(describeTask);
  });

  await client.send(new DeleteQueueCommand({ QueueUrl: queues.sourceUrl }));
  await client.send(new DeleteQueueCommand({ QueueUrl: queues.deadLetterUrl }));
  return {
    ...queues,
    sentBodies: BODIES,
    taskHandle: started.TaskHandle ?? null,
    statusesSeen,
    finalTask: latest,
    tasksListedAfterwards: afterCompletion,
    inSource,
    leftInDeadLetter,
  };
});
