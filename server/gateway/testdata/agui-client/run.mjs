// Runs one AG-UI thread against keel's gateway with the published
// @ag-ui/client HttpAgent, answering every interrupt, and prints what the
// agent collected as JSON on stdout: each AG-UI run's events (after the
// client validated them), its outcome, and the agent's messages.
//
// Environment: AGUI_URL (the gateway's /v1/ag-ui), AGUI_THREAD, AGUI_PROMPT,
// AGUI_ANSWER (JSON, the answer to each interrupt), AGUI_KEEL (JSON,
// forwardedProps.keel).
import { HttpAgent } from "@ag-ui/client";

const env = (name) => {
  const v = process.env[name];
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};

const agent = new HttpAgent({ url: env("AGUI_URL"), threadId: env("AGUI_THREAD") });
agent.addMessage({ id: "user-1", role: "user", content: env("AGUI_PROMPT") });
const answer = JSON.parse(env("AGUI_ANSWER"));
const forwardedProps = { keel: JSON.parse(env("AGUI_KEEL")) };

const runs = [];
let resume;
for (let i = 0; i < 5; i++) {
  const events = [];
  let outcome;
  await agent.runAgent(
    { runId: `agui-run-${i + 1}`, forwardedProps, ...(resume && { resume }) },
    {
      onEvent: ({ event }) => { events.push(event); },
      onRunFinishedEvent: (p) => { outcome = p.outcome; },
    },
  );
  runs.push({ events, outcome, pending: agent.pendingInterrupts.map((x) => x.id) });
  if (agent.pendingInterrupts.length === 0) break;
  resume = agent.pendingInterrupts.map((x) => ({ interruptId: x.id, status: "resolved", payload: answer }));
}
process.stdout.write(JSON.stringify({ runs, messages: agent.messages }) + "\n");
