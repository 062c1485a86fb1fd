// The client against a running gateway: server/e2e/clients_test.go starts one
// (an embedded Temporal server, a worker with scripted models, the
// gateway with an API key) and runs these with KEEL_GATEWAY_URL and the
// scripts' model specs in the environment. Without KEEL_GATEWAY_URL they
// are skipped.

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  KeelClient, isDurable, BadRequestError, ConflictError, NotFoundError, UnauthorizedError,
} from "../src/index.js";

const url = process.env.KEEL_GATEWAY_URL;
const skip = url ? false : "KEEL_GATEWAY_URL is not set (server/e2e/clients_test.go sets it)";
const client = url && new KeelClient(url, { apiKey: process.env.KEEL_API_KEY || undefined });
const prefix = process.env.KEEL_SESSION_PREFIX || `ts-${Date.now()}`;
const model = (name) => {
  const m = process.env[`KEEL_MODEL_${name}`];
  assert.ok(m, `KEEL_MODEL_${name} is not set`);
  return m;
};

// follow opens a stream and reads it on demand: until(pred) returns the
// items up to and including the first for which pred holds.
function follow(sessionId, options) {
  const stream = client.events(sessionId, options);
  const it = stream[Symbol.asyncIterator]();
  return {
    stream,
    async until(pred) {
      const got = [];
      for (;;) {
        const { value, done } = await it.next();
        assert.ok(!done, `the stream ended before the awaited event; got ${got.map((e) => e.type)}`);
        got.push(value);
        if (pred(value)) return got;
      }
    },
    close: () => it.return(),
  };
}

const durableOf = (items) => items.filter(isDurable);
const ofType = (type) => (e) => e.type === type;

test("a run is sent and streamed to run.completed; state, history, pages and resume", { skip }, async () => {
  const id = `${prefix}-hello`;
  const run = await client.send(id, { prompt: "Say hello.", model: model("HELLO") });
  assert.equal(run.run_id, `${id}/run-1`);
  assert.equal(run.number, 1);
  const f = follow(id, { after: run.base_seq });
  const items = await f.until(ofType("run.completed"));
  await f.close();
  const durable = durableOf(items);
  assert.deepEqual(durable.map((e) => e.seq), durable.map((_, i) => run.base_seq + 1 + i), "durable seqs dense from base_seq+1");
  assert.equal(durable[0].type, "run.started");
  assert.equal(durable[0].data.number, 1);
  assert.equal(durable.at(-1).data.text, "Hello from keel.");
  for (const e of items.filter((e) => !isDurable(e))) {
    if (e.type === "lag") continue;
    assert.equal(typeof e.after_seq, "number", `${e.type} without after_seq`);
    assert.equal(e.session_id, id);
  }

  const state = await client.state(id);
  assert.equal(state.session_id, id);
  assert.equal(state.state, "completed");
  assert.equal(state.runs, 1);
  assert.equal(state.last_seq, durable.at(-1).seq);
  assert.equal(state.active_run, undefined);

  const history = await client.history(id);
  const said = history.messages.map((m) => `${m.role}: ${m.content}`);
  assert.deepEqual(said, ["user: Say hello.", "assistant: Hello from keel."]);
  assert.equal(history.total, 2);

  const page = await client.eventsPage(id, { after: 0, limit: 500 });
  assert.deepEqual(page.events.map((e) => e.seq), durable.map((e) => e.seq));
  assert.equal(page.more, false);
  const small = await client.eventsPage(id, { after: 0, limit: 2 });
  assert.deepEqual(small.events.map((e) => e.seq), [1, 2]);
  assert.equal(small.more, true);
  assert.equal(small.next_after, 2);

  // Resume from an id: exactly the later durable events, in order.
  const mid = durable[Math.floor(durable.length / 2)].seq;
  for (const opts of [{ lastEventId: mid }, { lastEventId: String(mid), after: 0 }, { after: mid }]) {
    const r = follow(id, opts);
    const later = durableOf(await r.until(ofType("run.completed")));
    await r.close();
    assert.deepEqual(later.map((e) => [e.seq, e.type]), durable.filter((e) => e.seq > mid).map((e) => [e.seq, e.type]),
      `resumed with ${JSON.stringify(opts)}`);
  }

  // A cursor past the log is refused when the stream opens.
  const ahead = follow(id, { lastEventId: state.last_seq + 1000 });
  await assert.rejects(ahead.until(() => true), (err) => err instanceof ConflictError && err.code === "cursor_ahead" && err.status === 409);
});

test("a prompt's model is for its run only unless set_default makes it the session's", { skip }, async () => {
  const id = `${prefix}-defaults`;
  await client.send(id, { prompt: "one", model: model("DEFAULT"), set_default: true, if_active: "queue" });
  await client.send(id, { prompt: "two", model: model("OTHER"), if_active: "queue" });
  await client.send(id, { prompt: "three", if_active: "queue" });
  const f = follow(id, { after: 0 });
  const models = [];
  await f.until((e) => {
    if (e.type === "run.started") models.push(e.data.model);
    return ["run.completed", "run.failed", "run.cancelled"].includes(e.type) && e.data.revision === 3;
  });
  await f.close();
  assert.deepEqual(models, [model("DEFAULT"), model("OTHER"), model("DEFAULT")]);
});

test("a run that sleeps is steered, its steering retracted, and it is cancelled", { skip }, async () => {
  const id = `${prefix}-sleep`;
  const run = await client.send(id, { prompt: "Wait an hour.", model: model("SLEEP"), tools: ["sleep"] });
  const f = follow(id, { after: run.base_seq });
  await f.until((e) => e.type === "tool.started" && e.data.name === "sleep");

  await assert.rejects(client.send(id, { prompt: "again", model: model("SLEEP") }),
    (err) => err instanceof ConflictError && err.code === "run_active");
  const steer = await client.steer(id, "Also check the notes.");
  assert.equal(steer.run_id, run.run_id);
  const accepted = (await f.until(ofType("steering.accepted"))).at(-1);
  assert.deepEqual(accepted.data, { steering_id: steer.steering_id, text: "Also check the notes." });

  const retracted = await client.retractSteering(id, steer.steering_id);
  assert.deepEqual(retracted, { result: "retracted", run_id: run.run_id });
  assert.equal((await f.until(ofType("steering.retracted"))).at(-1).data.steering_id, steer.steering_id);
  assert.equal((await client.retractSteering(id, "steer-none")).result, "not_found");
  assert.deepEqual((await client.requests(id)).requests, []);

  const running = await client.state(id);
  assert.equal(running.state, "running");
  assert.equal(running.active_run.run_id, run.run_id);

  assert.equal((await client.cancel(id)).status, "cancel_requested");
  const tail = await f.until(ofType("run.cancelled"));
  await f.close();
  const finished = tail.find(ofType("tool.finished"));
  assert.equal(finished?.data.status, "interrupted", "the sleep's result");
  const after = await client.state(id);
  assert.notEqual(after.state, "running");
  assert.equal(after.active_run, undefined);
  // Cancelling again is idempotent; steering without a run is refused.
  assert.equal((await client.cancel(id)).status, "cancel_requested");
  await assert.rejects(client.steer(id, "late"), (err) => err instanceof ConflictError && err.code === "not_accepting");
});

test("a host-input request is listed and answered", { skip }, async () => {
  const id = `${prefix}-ask`;
  const run = await client.send(id, { prompt: "Pick a colour.", model: model("ASK"), tools: ["ask_user"] });
  const f = follow(id, { after: run.base_seq });
  const asked = (await f.until(ofType("host_input.requested"))).at(-1);
  assert.equal(asked.data.tool_call_id, "q1");
  assert.equal(asked.data.prompt, "Which colour?");

  assert.equal((await client.state(id)).state, "waiting_for_host_input");
  const open = await client.requests(id);
  assert.equal(open.run_id, run.run_id);
  assert.deepEqual(open.requests.map((r) => [r.request_id, r.tool_call_id, r.prompt]), [[asked.data.request_id, "q1", "Which colour?"]]);
  assert.deepEqual(open.requests[0].schema, { type: "string" });

  await assert.rejects(client.respond(id, asked.data.request_id, 42),
    (err) => err instanceof BadRequestError && err.code === "invalid_answer" && err.status === 400);
  await assert.rejects(client.respond(id, "no-such-request", "blue"),
    (err) => err instanceof NotFoundError && err.code === "unknown_request");
  assert.deepEqual(await client.respond(id, asked.data.request_id, "blue"), { status: "delivered", run_id: run.run_id });

  const rest = await f.until(ofType("run.completed"));
  await f.close();
  assert.equal(rest.find(ofType("host_input.resolved"))?.data.request_id, asked.data.request_id);
  assert.equal(rest.find(ofType("tool.finished"))?.data.output, "blue");
  assert.equal(rest.at(-1).data.text, "Blue it is.");
});

// pixel is a 1×1 PNG.
const pixel = Uint8Array.from(atob("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPj/HwADAgH/tIZQOQAAAABJRU5ErkJggg=="), (c) => c.charCodeAt(0));

test("an image is uploaded and sent with a prompt; history holds its reference", { skip }, async () => {
  const att = await client.uploadAttachment(pixel, "image/png", "pixel.png");
  assert.equal(att.kind, "image");
  assert.equal(att.media_type, "image/png");
  assert.equal(att.name, "pixel.png");
  assert.equal(att.bytes, pixel.length);
  assert.match(att.key, /^sha256:[0-9a-f]{64}$/);
  const again = await client.uploadAttachment(new Blob([pixel], { type: "image/png" }));
  assert.equal(again.key, att.key, "the same bytes, the same key");

  const id = `${prefix}-attach`;
  const run = await client.send(id, { prompt: "What is this?", model: model("HELLO"), attachments: [att] });
  const f = follow(id, { after: run.base_seq });
  await f.until(ofType("run.completed"));
  await f.close();
  const history = await client.history(id);
  assert.deepEqual(history.messages[0].attachments, [att]);

  await assert.rejects(client.uploadAttachment(new TextEncoder().encode("hello"), "text/plain"),
    (err) => err.status === 415 && err.code === "unsupported_media_type");
  await assert.rejects(client.uploadAttachment(new TextEncoder().encode("hello"), "image/png"),
    (err) => err instanceof BadRequestError && err.code === "invalid_input");
});

test("bad requests get typed errors", { skip }, async () => {
  await assert.rejects(client.state(`${prefix}-nobody`),
    (err) => err instanceof NotFoundError && err.status === 404 && err.code === "not_found");
  await assert.rejects(client.send(`${prefix}-bad`, { prompt: "" }),
    (err) => err instanceof BadRequestError && err.code === "invalid_input");
  await assert.rejects(client.send(`${prefix}-bad`, { prompt: "x", colour: "blue" }),
    (err) => err instanceof BadRequestError && err.code === "invalid_input");
  await assert.rejects(client.send(`${prefix}-bad`, { prompt: "x", model: "scripted:/etc/shadow", set_default: true }),
    (err) => err instanceof BadRequestError && err.code === "invalid_input");
  await assert.rejects(client.send("not a valid id!", "x"), (err) => err instanceof BadRequestError || err instanceof NotFoundError);
  if (process.env.KEEL_API_KEY) {
    const anon = new KeelClient(url);
    await assert.rejects(anon.state(`${prefix}-hello`), (err) => err instanceof UnauthorizedError && err.code === "unauthorized");
  }
  const list = await client.sessions({ limit: 5 });
  assert.equal(typeof list.namespace, "string");
  assert.ok(Array.isArray(list.sessions));
});

test("a session is forked at a run, once per ID, and rewound", { skip }, async () => {
  const id = `${prefix}-forksrc`;
  await client.send(id, { prompt: "one", model: model("DEFAULT"), if_active: "queue" });
  await client.send(id, { prompt: "two", model: model("DEFAULT"), if_active: "queue" });
  const f = follow(id, { after: 0 });
  await f.until((e) => ["run.completed", "run.failed", "run.cancelled"].includes(e.type) && e.data.revision === 2);
  await f.close();
  const source = await client.history(id);
  const fork = await client.fork(id, { run: 2, into: `${prefix}-fork` });
  assert.equal(fork.session_id, `${prefix}-fork`);
  assert.deepEqual([fork.parent.source, fork.parent.run, fork.parent.revision], [id, 2, 2]);
  assert.deepEqual(await client.fork(id, { run: 2, into: `${prefix}-fork` }), fork, "the same fork again");
  assert.deepEqual((await client.history(fork.session_id)).messages, source.messages);
  assert.deepEqual((await client.state(fork.session_id)).parent, fork.parent);
  // The source lists its forks once Temporal's visibility has them
  // (asked again until then), at most limit of them.
  await client.fork(id, { run: 1, into: `${prefix}-fork1` });
  const want = [`${prefix}-fork`, `${prefix}-fork1`];
  const deadline = Date.now() + 30_000;
  let listed;
  for (;;) {
    listed = await client.forks(id);
    if (listed.forks.length === 2 || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.deepEqual(listed, { forks: want.map((session_id) => ({ session_id })), truncated: false });
  const one = await client.forks(id, { limit: 1 });
  assert.equal(one.forks.length, 1);
  assert.ok(want.includes(one.forks[0].session_id));
  assert.equal(one.truncated, true);
  assert.deepEqual(await client.forks(fork.session_id), { forks: [], truncated: false }, "a fork without forks");
  const rewound = await client.rewind(id, { run: 0 });
  assert.deepEqual([rewound.from_run, rewound.revision, rewound.messages], [2, 3, 0]);
  assert.equal((await client.history(id)).total, 0);
  await assert.rejects(client.rewind(id, { run: 2 }), (err) => err.status === 404);
});

test("a schedule is created, triggered into a run, paused, listed and deleted", { skip }, async () => {
  const id = `${prefix}-sched`;
  const created = await client.createSchedule({ id, every: "1h", prompt: "Report.", config: { model: model("DEFAULT") } });
  assert.equal(created.schedule.id, id);
  assert.equal(created.schedule.session, undefined, "the default session is the schedule's ID");
  assert.equal(created.paused, false);
  assert.ok(created.next.length > 0);
  await assert.rejects(client.createSchedule({ id, every: "1h", prompt: "again" }), BadRequestError, "an ID in use");
  await assert.rejects(client.createSchedule({ id: `${prefix}-bad`, every: "1h", prompt: "x", config: { model: "scripted:/etc/passwd" } }),
    BadRequestError, "a model the worker does not offer");
  await client.triggerSchedule(id);
  // The firing and its run's end, as the schedule's description shows them.
  const deadline = Date.now() + 30_000;
  let st;
  for (;;) {
    st = await client.schedule(id);
    if ((st.recent.length === 1 && st.recent[0].run === "completed") || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.equal(st.recent[0].status, "sent");
  assert.equal(st.recent[0].result.session, id);
  assert.equal(st.recent[0].result.run_id, `${id}/run-1`);
  const page = await client.eventsPage(id);
  assert.deepEqual([page.events[0].type, page.events[0].data.prompt], ["run.started", "Report."]);
  assert.deepEqual(await client.pauseSchedule(id, { note: "quiet" }), { status: "paused" });
  st = await client.schedule(id);
  assert.deepEqual([st.paused, st.note, st.next], [true, "quiet", []]);
  const changed = await client.updateSchedule(id, { prompt: "Weekly report.", cron: "0 9 * * 1" });
  assert.deepEqual([changed.schedule.prompt, changed.schedule.cron, changed.paused], ["Weekly report.", "0 9 * * 1", true]);
  assert.deepEqual(await client.unpauseSchedule(id), { status: "unpaused" });
  let listed;
  for (const until = Date.now() + 30_000; ;) {
    listed = await client.schedules();
    // Visibility is eventually consistent: wait until it has the unpause.
    if (listed.schedules.some((s) => s.id === id && !s.paused) || Date.now() > until) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.ok(listed.schedules.some((s) => s.id === id && !s.paused), "listed");
  assert.deepEqual(await client.deleteSchedule(id), { status: "deleted" });
  await assert.rejects(client.schedule(id), NotFoundError);
  assert.equal((await client.state(id)).runs, 1, "the session stays");
});
