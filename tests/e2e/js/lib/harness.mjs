/**
 * Plumbing shared by the scenario scripts that tests/e2e/test_js_sdk.py runs with Node.
 *
 * A scenario reads where FerryMQ is from the environment (SQS_ENDPOINT, SQS_REGION, SQS_ACCESS_KEY_ID,
 * SQS_SECRET_ACCESS_KEY), takes its queue names from argv, and prints one JSON object of observations on
 * stdout; the Python test asserts on that object. An exception the scenario did not expect goes to stderr
 * and ends the process with status 1, so the test fails with the SDK's own message.
 */
import { SQSClient } from "@aws-sdk/client-sqs";

function required(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`environment variable ${name} is not set`);
  }
  return value;
}

export function sqsClientFromEnv() {
  return new SQSClient({
    endpoint: required("SQS_ENDPOINT"),
    region: required("SQS_REGION"),
    credentials: {
      accessKeyId: required("SQS_ACCESS_KEY_ID"),
      secretAccessKey: required("SQS_SECRET_ACCESS_KEY"),
    },
    // A retried request would hide the first answer, which is the one under test.
    maxAttempts: 1,
  });
}

/** The argv value at ``index`` (after the script's path), or an error naming what is missing. */
export function argument(index, name) {
  const value = process.argv[2 + index];
  if (!value) {
    throw new Error(`missing argument ${index + 1}: ${name}`);
  }
  return value;
}

/** What a test needs to know about an error the SDK raised. */
export function describeError(error) {
  return {
    name: error.name,
    code: error.Code ?? null,
    message: error.message,
    httpStatusCode: error.$metadata?.httpStatusCode ?? null,
    fault: error.$fault ?? null,
  };
}

/**
 * Awaits ``call`` and reports how it went, as ``{ value }`` or ``{ error }``: for steps after which the
 * scenario still has something worth observing.
 */
export async function outcome(call) {
  try {
    return { value: await call() };
  } catch (error) {
    return { error: describeError(error) };
  }
}

/** Runs ``scenario`` and prints its result as JSON; the exit status says whether it ran to its end. */
export function runScenario(scenario) {
  const client = sqsClientFromEnv();
  scenario(client)
    .then((result) => {
      process.stdout.write(`${JSON.stringify(result)}\n`);
    })
    .catch((error) => {
      process.stderr.write(`${JSON.stringify(describeError(error))}\n${error.stack}\n`);
      process.exitCode = 1;
    })
    .finally(() => client.destroy());
}

