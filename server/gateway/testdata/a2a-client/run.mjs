// Drives keel's A2A endpoint with the published A2A JavaScript client
// (@a2a-js/sdk's ClientFactory; keel speaks A2A 0.3, which the client
// reaches through its v0.3 compatibility layer). Streams a task to its
// question, answers it with the next message, sends a typed task, and
// cancels a resubscribed one. Prints what it saw as one JSON object.
// Run by gateway/a2a_client_test.go; A2A_URL is the gateway's base URL,
// A2A_KEY an API key.
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { Role, taskStateToJSON } from "@a2a-js/sdk";

const base = process.env.A2A_URL;
const key = process.env.A2A_KEY;
const fetchImpl = (url, init = {}) => {
  const headers = new Headers(init.headers);
  if (key) headers.set("Authorization", `Bearer ${key}`);
  return fetch(url, { ...init, headers });
};
const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl, legacyCompat: { enabled: true } }),
  }),
);

// card is an agent's card URL, given whole: resolving the well-known
// path against an agent's endpoint URL would drop its last segment.
const card = (agent) => `${base}/v1/a2a/${agent}/.well-known/agent-card.json`;

let n = 0;
const message = (text, taskId = "", contextId = "") => ({
  messageId: `m-${++n}`,
  contextId,
  taskId,
  role: Role.ROLE_USER,
  parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const request = (msg, returnImmediately = false) => ({
  tenant: "",
  message: msg,
  configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately },
  metadata: undefined,
});
// summary keeps what the test checks of a stream event.
const summary = (ev) => {
  const p = ev.payload;
  switch (p?.$case) {
    case "task":
      return { kind: "task", id: p.value.id, contextId: p.value.contextId, state: taskStateToJSON(p.value.status?.state) };
    case "statusUpdate":
      return {
        kind: "status",
        state: taskStateToJSON(p.value.status?.state),
        text: p.value.status?.message?.parts?.find((x) => x.content?.$case === "text")?.content.value ?? "",
      };
    case "artifactUpdate":
      return {
        kind: "artifact",
        append: p.value.append,
        lastChunk: p.value.lastChunk,
        text: p.value.artifact?.parts?.find((x) => x.content?.$case === "text")?.content.value ?? "",
      };
  }
  return { kind: p?.$case ?? "none" };
};
const collect = async (gen) => {
  const out = [];
  for await (const ev of gen) out.push(summary(ev));
  return out;
};

const out = {};
const asker = await factory.createFromUrl(card("asker"), "");
out.asking = await collect(asker.sendMessageStream(request(message("pick"))));
const first = out.asking[0];
out.answering = await collect(asker.sendMessageStream(request(message("green", first.id, first.contextId))));
const got = await asker.getTask({ tenant: "", id: first.id, historyLength: undefined });
out.got = taskStateToJSON(got.status?.state);

const typed = await factory.createFromUrl(card("typed"), "");
const res = await typed.sendMessage(request(message("count")));
out.typed = {
  state: taskStateToJSON(res.status?.state),
  data: res.artifacts?.[0]?.parts?.find((x) => x.content?.$case === "data")?.content.value ?? null,
};

const researcher = await factory.createFromUrl(card("researcher"), "");
const started = await researcher.sendMessage(request(message("wait"), true));
out.started = taskStateToJSON(started.status?.state);
// Let the run reach its tool, then follow it and cancel it.
await new Promise((r) => setTimeout(r, 1000));
const followed = collect(researcher.resubscribeTask({ tenant: "", id: started.id }));
await new Promise((r) => setTimeout(r, 300));
const cancelled = await researcher.cancelTask({ tenant: "", id: started.id, metadata: undefined });
out.cancelled = taskStateToJSON(cancelled.status?.state);
out.resubscribed = await followed;
try {
  await researcher.cancelTask({ tenant: "", id: started.id, metadata: undefined });
  out.cancelAgain = "";
} catch (e) {
  out.cancelAgain = String(e);
}
process.stdout.write(JSON.stringify(out));
