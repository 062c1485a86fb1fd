import { test } from "node:test";
import assert from "node:assert/strict";
import { parseSSE, KeelClient, ConflictError, UnavailableError, NotFoundError, ConnectionError, BadRequestError, KeelError } from "../src/index.js";

async function* chunks(...parts) {
  const enc = new TextEncoder();
  for (const p of parts) yield enc.encode(p);
}

async function collect(it) {
  const out = [];
  for await (const x of it) out.push(x);
  return out;
}

test("parseSSE: fields, comments, multi-line data, and every line end, split anywhere", async () => {
  const text = "retry: 1000\n\n: comment\nid: 1\nevent: run.started\ndata: {\"a\":1}\n\r\nevent: text.delta\r\ndata: x\rdata: y\r\rid: 2\ndata:z\n\n";
  const want = [
    { id: "1", event: "run.started", data: "{\"a\":1}" },
    { event: "text.delta", data: "x\ny" },
    { id: "2", event: "message", data: "z" },
  ];
  let retry;
  assert.deepEqual(await collect(parseSSE(chunks(text), (ms) => { retry = ms; })), want);
  assert.equal(retry, 1000);
  // One byte at a time: CRLF split across chunks is one line end.
  assert.deepEqual(await collect(parseSSE(chunks(...text.split("")))), want);
  // An unfinished message at the end is not dispatched.
  assert.deepEqual(await collect(parseSSE(chunks("id: 9\ndata: cut"))), []);
});

// A fetch that answers each stream request with the next body, and
// records the cursor headers and queries it was sent.
function streams(...bodies) {
  const seen = [];
  const fetch = async (url, init) => {
    seen.push({ lastEventId: init.headers["Last-Event-ID"], after: new URL(url).searchParams.get("after") });
    const body = bodies.shift();
    if (body === undefined) return Response.json({ code: "not_found", message: "gone" }, { status: 404 });
    if (typeof body === "number") return Response.json({ code: "x", message: "status" }, { status: body });
    return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
  };
  return { seen, fetch };
}

const env = (seq, type) => JSON.stringify({ seq, type, session_id: "s", run_id: "s/run-1", at: "2026-01-01T00:00:00Z", data: {} });

test("a broken stream reconnects with Last-Event-ID and yields no durable event twice", async () => {
  const { seen, fetch } = streams(
    `id: 1\nevent: run.started\ndata: ${env(1, "run.started")}\n\nevent: text.delta\ndata: {"type":"text.delta","session_id":"s","after_seq":1,"at":"x","data":{"text":"hi"}}\n\nid: 2\nevent: step.started\ndata: ${env(2, "step.started")}\n\n`,
    `event: stream_error\ndata: {"code":"unavailable","message":"Temporal is down"}\n\n`,
    `event: lag\ndata: {"missed":3,"last_seq":2}\n\nid: 3\nevent: run.completed\ndata: ${env(3, "run.completed")}\n\n`,
  );
  const c = new KeelClient("http://gw.test", { fetch });
  const s = c.events("s", { after: 0, reconnectDelay: 0 });
  const got = [];
  for await (const e of s) {
    got.push(e.seq ?? e.type);
    if (e.type === "run.completed") break;
  }
  assert.deepEqual(got, [1, "text.delta", 2, "lag", 3]);
  assert.deepEqual(seen, [{ lastEventId: undefined, after: "0" }, { lastEventId: "2", after: null }, { lastEventId: "2", after: null }]);
  assert.equal(s.reconnects, 2);
  assert.equal(s.lastEventId, "3");
});

test("a stream refused when it opens throws the typed error at once", async () => {
  const { fetch } = streams(409);
  const c = new KeelClient("http://gw.test", { fetch });
  await assert.rejects(collect(c.events("s", { lastEventId: 99 })), ConflictError);
  const down = new KeelClient("http://gw.test", { fetch: async () => { throw new TypeError("fetch failed"); } });
  await assert.rejects(collect(down.events("s")), ConnectionError);
});

test("a stream_error that reconnecting cannot mend ends the stream with its typed error", async () => {
  const { fetch } = streams(`event: stream_error\ndata: {"code":"not_accepting","message":"terminated"}\n\n`);
  const c = new KeelClient("http://gw.test", { fetch });
  const err = await collect(c.events("s", { reconnectDelay: 0 })).then(() => undefined, (e) => e);
  assert.ok(err instanceof ConflictError, `got ${err}`);
  assert.equal(err.code, "not_accepting");
});

test("gives up after maxReconnects", async () => {
  const { seen, fetch } = streams(": hello\n\n", 503, 503, 503);
  const c = new KeelClient("http://gw.test", { fetch });
  await assert.rejects(collect(c.events("s", { reconnectDelay: 0, maxReconnects: 2 })), UnavailableError);
  assert.equal(seen.length, 3);
});

test("error answers become typed errors with code, status and Retry-After", async () => {
  const fetch = async () => Response.json({ code: "overloaded", message: "busy", retryable: true }, { status: 503, headers: { "Retry-After": "5" } });
  const err = await new KeelClient("http://gw.test", { fetch }).state("s").then(() => undefined, (e) => e);
  assert.ok(err instanceof UnavailableError && err instanceof KeelError && err instanceof Error);
  assert.deepEqual([err.status, err.code, err.message, err.retryable, err.retryAfter, err.name], [503, "overloaded", "busy", true, 5, "UnavailableError"]);
  const notJSON = async () => new Response("<html>", { status: 404 });
  const e404 = await new KeelClient("http://gw.test", { fetch: notJSON }).state("s").then(() => undefined, (e) => e);
  assert.ok(e404 instanceof NotFoundError);
  assert.equal(e404.code, "unknown");
  const e400 = await new KeelClient("http://gw.test", { fetch: async () => Response.json({ code: "invalid_input", message: "m" }, { status: 400 }) })
    .send("s", "").then(() => undefined, (e) => e);
  assert.ok(e400 instanceof BadRequestError);
  assert.equal(e400.retryable, false);
});
