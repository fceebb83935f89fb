// The official A2A JavaScript client (@a2a-js/sdk) against the gateway, on one binding.
//
//   node client.mjs <agent base URL> <JSONRPC|HTTP+JSON> <prompt> <expected reply text>
//
// The SDK resolves the agent card and picks the interface for the binding from its
// supportedInterfaces. Runs a blocking send, GetTask, ListTasks, a streamed send,
// CancelTask of a finished task (TaskNotCancelableError) and GetTask of an unknown id
// (TaskNotFoundError); prints one JSON line with what it saw and exits 1 on the first
// mismatch.
import { randomUUID } from "node:crypto";

import { ClientFactory, JsonRpcTransportFactory, RestTransportFactory } from "@a2a-js/sdk/client";
import { TaskNotCancelableError, TaskNotFoundError } from "@a2a-js/sdk/errors";

const [baseUrl, binding, prompt, expected] = process.argv.slice(2);
const transports = { JSONRPC: new JsonRpcTransportFactory(), "HTTP+JSON": new RestTransportFactory() };
if (!transports[binding]) {
  throw new Error(`unknown binding ${binding}`);
}

function check(cond, what, seen) {
  if (!cond) {
    console.log(JSON.stringify({ ok: false, failed: what, seen }, (_, v) => (typeof v === "bigint" ? String(v) : v)));
    process.exit(1);
  }
}

const textOf = (parts) => (parts ?? []).filter((p) => p.content?.$case === "text").map((p) => p.content.value).join("");

function message(text) {
  return { messageId: randomUUID(), role: 1, parts: [{ content: { $case: "text", value: text } }] };
}

const factory = new ClientFactory({ transports: [transports[binding]] });
const client = await factory.createFromUrl(baseUrl);
const report = { ok: true, binding };

// Blocking send: the completed task with the upstream's reply.
const sent = await client.sendMessage({ message: message(prompt) });
check(sent?.id && sent.status, "SendMessage returns a task", sent);
check(sent.status.state === 3, "the task is COMPLETED (3)", sent.status);
check(textOf(sent.artifacts?.[0]?.parts) === expected, "the artifact text", sent.artifacts);
report.sent = { id: sent.id, state: sent.status.state };

const got = await client.getTask({ id: sent.id });
check(got.id === sent.id && got.status.state === 3, "GetTask", got);

// `status` is a required field of the SDK's type (0: no filter); left out, its JSON-RPC
// encoder sends the invalid enum name "UNRECOGNIZED".
const listed = await client.listTasks({ contextId: sent.contextId, pageSize: 10, status: 0 });
check(listed.tasks.length === 1 && listed.tasks[0].id === sent.id, "ListTasks by context", listed);

// Streamed send: the task first, then updates, ending COMPLETED.
const kinds = [];
let lastState;
let streamedText = "";
for await (const event of client.sendMessageStream({ message: message(prompt) })) {
  const payload = event.payload;
  kinds.push(payload?.$case);
  if (payload?.$case === "statusUpdate") lastState = payload.value.status?.state;
  if (payload?.$case === "artifactUpdate") streamedText += textOf(payload.value.artifact?.parts);
}
check(kinds[0] === "task", "the stream opens with the task", kinds);
check(lastState === 3, "the stream ends COMPLETED", kinds);
check(streamedText === expected, "the streamed artifact text", streamedText);
report.streamed = kinds;

// Errors arrive as the SDK's typed errors.
try {
  await client.cancelTask({ id: sent.id });
  check(false, "CancelTask of a completed task fails", null);
} catch (e) {
  check(e instanceof TaskNotCancelableError, "TaskNotCancelableError", String(e));
}
try {
  await client.getTask({ id: "no-such-task" });
  check(false, "GetTask of an unknown id fails", null);
} catch (e) {
  check(e instanceof TaskNotFoundError, "TaskNotFoundError", String(e));
}
report.errors = ["TaskNotCancelableError", "TaskNotFoundError"];
console.log(JSON.stringify(report));
