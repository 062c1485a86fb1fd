// The client's calls against routes.json: every operation the table lists
// is one the client makes, with exactly the table's query parameters,
// headers and body fields, and it makes no other. server/e2e/clients_test.go
// checks the table against the gateway's OpenAPI document.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { KeelClient } from "../src/index.js";

const table = JSON.parse(readFileSync(new URL("../routes.json", import.meta.url), "utf8"));

// pixel is a 1×1 PNG.
const pixel = Uint8Array.from(atob("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPj/HwADAgH/tIZQOQAAAABJRU5ErkJggg=="), (c) => c.charCodeAt(0));

// recorder is a fetch that answers {} (or an empty event stream) and
// records each request: a JSON body decoded, any other as it was sent
// (raw).
function recorder() {
  const calls = [];
  const fetch = async (url, init) => {
    const json = init.headers["Content-Type"] === "application/json";
    calls.push({ method: init.method, url: new URL(url), headers: init.headers,
      body: json && init.body !== undefined ? JSON.parse(init.body) : undefined, raw: json ? undefined : init.body });
    if (init.headers.Accept === "text/event-stream") {
      return new Response(": nothing\n\n", { status: 200, headers: { "Content-Type": "text/event-stream" } });
    }
    return Response.json({});
  };
  return { calls, fetch };
}

// operationOf finds the table's operation whose method and path template
// match a request.
function operationOf(method, pathname) {
  for (const [name, op] of Object.entries(table.operations)) {
    const re = new RegExp("^" + op.path.replace(/\{[a-z_]+\}/g, "[^/]+") + "$");
    if (op.method === method && re.test(pathname)) return name;
  }
  return undefined;
}

// Every call, with every optional argument.
async function callEverything(c) {
  await c.sessions({ limit: 5 });
  const att = await c.uploadAttachment(pixel, "image/png", "pixel.png");
  await c.uploadAttachment(new Blob([pixel], { type: "image/png" }));
  await c.send("s1", { prompt: "p", attachments: [att], model: "m", tools: [], system: "s", max_steps: 3, max_tokens: 500, approvals: { "*": "ask" }, reasoning: { effort: "low" }, if_active: "queue", set_default: true, budget: { max: 0.5, currency: "USD" }, session_budget: { max_tokens: 1000 }, output_schema: { type: "object" }, agent: "a", hooks: ["guard"], once: "k" });
  await c.state("s1");
  await c.history("s1", { offset: 1, limit: 2 });
  await c.eventsPage("s1", { after: 3, limit: 4 });
  // A stream resumed (Last-Event-ID) and one started with after; neither
  // reconnects, so the empty answer ends them.
  for (const opts of [{ lastEventId: 7 }, { after: 3 }]) {
    await assert.rejects(async () => { for await (const _ of c.events("s1", { ...opts, reconnect: false })) { /* none */ } });
  }
  await c.steer("s1", "t", { run: 2, attachments: [att] });
  await c.retractSteering("s1", "steer-1", { run: 2 });
  await c.respond("s1", "r1", { any: "json" }, { run: 2 });
  await c.cancel("s1", { run: 2 });
  await c.requests("s1", { run: 2 });
  await c.fork("s1", { run: 2, step: 1, into: "s2" });
  await c.rewind("s1", { run: 1, step: 1 });
  await c.forks("s1", { limit: 3 });
  const config = { model: "m", tools: [], system: "s", max_steps: 3, max_tokens: 500, approvals: { "*": "ask" }, reasoning: { effort: "low" }, budget: { max: 0.5, currency: "USD" }, session_budget: { max_tokens: 1000 }, hooks: ["guard"], output_schema: { type: "object" } };
  await c.schedules({ limit: 5 });
  await c.createSchedule({ id: "d1", cron: "0 9 * * 1-5", every: "1h", timezone: "Europe/Berlin", jitter: "30s", prompt: "p", session: "s1", new_session: false, config, overlap: "queue", pause_on_failure: true, catchup_window: "15m" });
  await c.schedule("d1");
  await c.updateSchedule("d1", { cron: "@daily", every: "2h", timezone: "UTC", jitter: "1m", prompt: "q", session: "s2", new_session: false, config, overlap: "skip", pause_on_failure: false, catchup_window: "1h" });
  await c.pauseSchedule("d1", { note: "n" });
  await c.unpauseSchedule("d1", { note: "n" });
  await c.triggerSchedule("d1");
  await c.deleteSchedule("d1");
  await c.startEval({ id: "e1", cases: [{ id: "a", prompt: "p" }], sessions: ["s1"], session_prefix: "s", candidate: config, baseline: config, judge: { model: "m" }, concurrency: 2, budget: { max: 1, currency: "USD" } });
  await c.eval("e1");
  await c.evalReport("e1");
  await c.cancelEval("e1");
}

test("the client calls exactly the operations of routes.json, with their parameters and fields", async () => {
  const { calls, fetch } = recorder();
  await callEverything(new KeelClient("http://gw.test", { apiKey: "k", fetch }));
  const seen = new Map();
  for (const call of calls) {
    const name = operationOf(call.method, call.url.pathname);
    assert.ok(name, `${call.method} ${call.url.pathname} is in no operation of routes.json`);
    const op = table.operations[name];
    const got = seen.get(name) || { query: new Set(), headers: new Set(), body: new Set() };
    for (const k of call.url.searchParams.keys()) got.query.add(k);
    if (call.headers["Last-Event-ID"] !== undefined) got.headers.add("Last-Event-ID");
    for (const k of Object.keys(call.body || {})) got.body.add(k);
    assert.equal(call.headers.Authorization, "Bearer k", `${name} without the API key`);
    if (call.body !== undefined) assert.equal(call.headers["Content-Type"], "application/json");
    seen.set(name, got);
    // A route without a JSON body sends none (the gateway refuses unknown
    // fields); an upload sends the file as its media type.
    if (!op.body) assert.equal(call.body, undefined, `${name} sent a body`);
    if (name === "uploadAttachment") {
      assert.equal(call.headers["Content-Type"], "image/png");
      assert.ok(call.raw !== undefined, "an upload without its bytes");
    } else {
      assert.equal(call.raw, undefined, `${name} sent a body that is not JSON`);
    }
  }
  assert.deepEqual([...seen.keys()].sort(), Object.keys(table.operations).sort(), "operations called");
  for (const [name, op] of Object.entries(table.operations)) {
    const got = seen.get(name);
    assert.deepEqual([...got.query].sort(), [...(op.query || [])].sort(), `${name}: query parameters`);
    assert.deepEqual([...got.headers].sort(), [...(op.headers || [])].sort(), `${name}: headers`);
    const fields = op.body ? table.schemas[op.body].filter((f) => !f.includes(".")) : [];
    assert.deepEqual([...got.body].sort(), [...fields].sort(), `${name}: body fields`);
  }
});

test("the check above fails for a route the client does not call", async () => {
  const { calls, fetch } = recorder();
  const c = new KeelClient("http://gw.test", { fetch });
  await c.state("s1");
  await c.cancel("s1");
  assert.equal(operationOf(calls[0].method, calls[0].url.pathname), "getSession");
  assert.equal(operationOf("POST", "/v1/sessions/s1/unknown"), undefined);
  assert.equal(operationOf("GET", "/v1/sessions/s1/cancel"), undefined, "method matters");
});

test("IDs are escaped into one path segment", async () => {
  const { calls, fetch } = recorder();
  const c = new KeelClient("http://gw.test/v1/", { fetch });
  await c.retractSteering("s 1", "a/b");
  assert.equal(calls[0].url.pathname, "/v1/sessions/s%201/steer/a%2Fb");
  assert.throws(() => c.state(""), TypeError);
});

test("an upload sends the bytes as their media type, a name in the query, and answers the reference", async () => {
  const { calls, fetch } = recorder();
  const c = new KeelClient("http://gw.test", { fetch });
  await c.uploadAttachment(pixel, "image/png", "a b.png");
  assert.equal(calls[0].url.pathname, "/v1/attachments");
  assert.equal(calls[0].url.searchParams.get("name"), "a b.png");
  assert.equal(calls[0].headers["Content-Type"], "image/png");
  assert.equal(calls[0].raw, pixel);
  await c.uploadAttachment(new Blob([pixel], { type: "application/pdf" }));
  assert.equal(calls[1].headers["Content-Type"], "application/pdf", "a Blob's own type");
  assert.equal(calls[1].url.search, "", "no name, no query");
  assert.throws(() => c.uploadAttachment(pixel), TypeError, "bytes without a media type");
});
