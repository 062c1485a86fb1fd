// Resumes an MCP call on another gateway with the published MCP
// TypeScript client: calls agent__researcher through MCP_URL, prints
// {"started": RUN} once its tool runs, waits for a line on stdin (the
// test has stopped that gateway), then resumes the call from the last
// event ID it saw through MCP_URL2 with the same MCP session and prints
// {"result": ..., "token": ...}. Run by gateway/mcp_client_test.go.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const headers = process.env.MCP_KEY ? { Authorization: `Bearer ${process.env.MCP_KEY}` } : {};
const params = { name: "agent__researcher", arguments: { task: "wait" } };
const rl = createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();

const first = new Client({ name: "keel-mcp-resume-test", version: "0.0.0" });
const t1 = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
  requestInit: { headers },
  reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 100, maxReconnectionDelay: 100, reconnectionDelayGrowFactor: 1 },
});
await first.connect(t1);
let token = "";
let run = "";
let started;
const running = new Promise((resolve) => (started = resolve));
const call = first
  .callTool(params, undefined, {
    onresumptiontoken: (t) => (token = t),
    onprogress: (p) => {
      const m = /^run (\S+) started$/.exec(p.message ?? "");
      if (m) run = m[1];
      if ((p.message ?? "").startsWith("tool gate started")) started(run);
    },
  })
  .then(() => "the first gateway answered", (e) => String(e));
process.stdout.write(JSON.stringify({ started: await running }) + "\n");
await lines.next();
rl.close();
const sessionId = t1.sessionId;
await t1.close();
const firstEnded = await call;

const second = new Client({ name: "keel-mcp-resume-test", version: "0.0.0" });
const t2 = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL2), { requestInit: { headers }, sessionId });
await second.connect(t2); // a known session: no initialize
const result = await second.request({ method: "tools/call", params }, CallToolResultSchema, { resumptionToken: token });
await second.close();
process.stdout.write(JSON.stringify({ result, token, firstEnded }) + "\n");
