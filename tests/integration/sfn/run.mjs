// Runs an ASL definition offline with aws-local-stepfunctions and prints one JSON line:
// {"status": "SUCCEEDED", "output": ...} or {"status": "FAILED", "error", "cause"}, with the
// retries and catches seen. Lambda tasks call AWS_ENDPOINT_URL_LAMBDA (the test's endpoint).
// usage: node --require ./polyfill.cjs run.mjs DEFINITION.json INPUT_JSON OVERRIDES_JSON
import { readFileSync } from "node:fs";
import { StateMachine } from "aws-local-stepfunctions";

const [definitionPath, inputJson = "{}", overridesJson = "{}"] = process.argv.slice(2);
const machine = new StateMachine(JSON.parse(readFileSync(definitionPath, "utf8")), {
  validationOptions: { checkArn: true, checkPaths: true },
  awsConfig: { region: "us-east-1", credentials: { accessKeys: { accessKeyId: "local", secretAccessKey: "local" } } },
});
const execution = machine.run(JSON.parse(inputJson), { overrides: JSON.parse(overridesJson) });
const events = [];
const watching = (async () => {
  for await (const event of execution.eventLogs) {
    if (/Retried|Caught|Failed/i.test(event.type)) {
      events.push({ type: event.type, state: event.state?.name ?? null });
    }
  }
})();
let result;
try {
  result = { status: "SUCCEEDED", output: await execution.result };
} catch (error) {
  result = { status: "FAILED", error: error.name, cause: String(error.cause ?? error.message) };
}
await Promise.race([watching, new Promise((resolve) => setTimeout(resolve, 200))]);
console.log(JSON.stringify({ ...result, events }));
