// Drives keel's MCP endpoint with the published MCP TypeScript client:
// lists the tools, calls a typed agent with progress, answers an
// elicitation, and cancels a call. Prints what it saw as one JSON object.
// Run by gateway/mcp_client_test.go; MCP_URL names the endpoint, MCP_KEY
// an API key (optional), MCP_ANSWER the elicitation's answer.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const url = new URL(process.env.MCP_URL);
const headers = process.env.MCP_KEY ? { Authorization: `Bearer ${process.env.MCP_KEY}` } : {};

const client = new Client({ name: "keel-mcp-client-test", version: "0.0.0" }, { capabilities: { elicitation: {} } });
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params.message);
  return { action: "accept", content: { answer: process.env.MCP_ANSWER } };
});
await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));

const out = {};
out.tools = (await client.listTools()).tools.map((t) => ({ name: t.name, hasOutputSchema: !!t.outputSchema }));

const progress = [];
// The client checks structuredContent against the tool's output schema.
out.typed = await client.callTool({ name: "agent__typed", arguments: { task: "count" } }, undefined, {
  onprogress: (p) => progress.push(p),
});
out.progress = progress;

out.asker = await client.callTool({ name: "agent__asker", arguments: { task: "pick" } });
out.asked = asked;

// Cancel a call once its tool is running: the client sends
// notifications/cancelled.
const ac = new AbortController();
let run = "";
try {
  await client.callTool({ name: "agent__researcher", arguments: { task: "wait" } }, undefined, {
    signal: ac.signal,
    onprogress: (p) => {
      const m = /^run (\S+) started$/.exec(p.message ?? "");
      if (m) run = m[1];
      if ((p.message ?? "").startsWith("tool gate started")) ac.abort("enough");
    },
  });
  out.cancel = { run, error: "" };
} catch (e) {
  out.cancel = { run, error: String(e) };
}
// The client sends notifications/cancelled without waiting for it to
// be delivered; closing at once could abort that request.
await new Promise((r) => setTimeout(r, 500));
await client.close();
process.stdout.write(JSON.stringify(out));
