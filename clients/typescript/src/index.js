// keel's HTTP client for JavaScript and TypeScript: the gateway's routes
// (docs/gateway.md) over the platform's fetch, with no dependencies. Types
// live in ../index.d.ts; routes.json lists the routes and fields used here,
// checked against the gateway's OpenAPI document.

import { ConnectionError, KeelError, errorFrom } from "./errors.js";
import { parseSSE } from "./sse.js";

export * from "./errors.js";
export { parseSSE } from "./sse.js";

/** The gateway's default address under `keel dev`. */
export const DEFAULT_BASE_URL = "http://127.0.0.1:7280";

// Codes of stream_error events after which reconnecting can help.
const retryableStreamCodes = new Set(["unavailable", "overloaded"]);

/** A client of one keel gateway. */
export class KeelClient {
  /**
   * @param {string} [baseURL] the gateway, e.g. http://127.0.0.1:7280 (a trailing /v1 is fine).
   * @param {{apiKey?: string, fetch?: typeof fetch, headers?: Record<string, string>}} [options]
   */
  constructor(baseURL = DEFAULT_BASE_URL, options = {}) {
    this.baseURL = baseURL.replace(/\/+$/, "").replace(/\/v1$/, "");
    this.apiKey = options.apiKey;
    this.fetch = options.fetch || globalThis.fetch.bind(globalThis);
    this.headers = options.headers || {};
  }

  /** The newest sessions, running ones first (GET /v1/sessions). */
  sessions(options = {}) {
    return this.#json("GET", "/v1/sessions", { query: { limit: options.limit } });
  }

  /**
   * Sends a prompt; the first creates the session (POST /v1/sessions/{id}/runs).
   * @param {string} sessionId
   * @param {string | Record<string, unknown>} request a prompt, or a RunRequest.
   */
  send(sessionId, request) {
    const body = typeof request === "string" ? { prompt: request } : request;
    return this.#json("POST", `${session(sessionId)}/runs`, { body });
  }

  /** The session's state (GET /v1/sessions/{id}). */
  state(sessionId) {
    return this.#json("GET", session(sessionId));
  }

  /** A page of the committed transcript (GET /v1/sessions/{id}/history). */
  history(sessionId, options = {}) {
    return this.#json("GET", `${session(sessionId)}/history`, { query: { offset: options.offset, limit: options.limit } });
  }

  /** A JSON page of durable events after a sequence (GET /v1/sessions/{id}/events). */
  eventsPage(sessionId, options = {}) {
    return this.#json("GET", `${session(sessionId)}/events`, { query: { after: options.after, limit: options.limit } });
  }

  /**
   * Follows the session's events as Server-Sent Events: durable events
   * after the cursor, each once and in order, with deltas between them and
   * lag notices where deltas were lost. The stream follows the session
   * until the loop leaves it (break), `close()` or the signal aborts. When
   * the connection drops, or the gateway reports a retryable stream_error,
   * it reconnects with Last-Event-ID (the last durable seq it yielded), so
   * no durable event is skipped or repeated.
   * @param {string} sessionId
   * @param {{after?: number, lastEventId?: string | number, signal?: AbortSignal, reconnect?: boolean, maxReconnects?: number, reconnectDelay?: number}} [options]
   */
  events(sessionId, options = {}) {
    return new EventStream(this, sessionId, options);
  }

  /**
   * Steers the active run (POST /v1/sessions/{id}/steer); resolves once
   * accepted. `options.attachments` are references from uploadAttachment.
   */
  steer(sessionId, text, options = {}) {
    const body = { text };
    if (options.attachments !== undefined) body.attachments = options.attachments;
    return this.#json("POST", `${session(sessionId)}/steer`, { query: { run: options.run }, body });
  }

  /**
   * Stores an image or a PDF for a prompt or steering to carry (POST
   * /v1/attachments) and resolves to its reference, an Attachment: pass it
   * in `attachments` of send() or steer(). `data` is the file's bytes (a
   * Blob, ArrayBuffer or typed array); `mediaType` is image/png,
   * image/jpeg, image/gif, image/webp or application/pdf (default: a
   * Blob's own type), and the gateway checks the bytes against it; `name`
   * is for display. An upload belongs to no session.
   * @param {Blob | ArrayBuffer | ArrayBufferView} data
   * @param {string} [mediaType]
   * @param {string} [name]
   */
  uploadAttachment(data, mediaType, name) {
    const type = mediaType || (typeof Blob !== "undefined" && data instanceof Blob ? data.type : "");
    if (!type) throw new TypeError("keel: uploadAttachment needs the file's media type (image/png, application/pdf, ...)");
    return this.#json("POST", "/v1/attachments", { query: { name }, data, contentType: type });
  }

  /** Withdraws staged steering (DELETE /v1/sessions/{id}/steer/{steering_id}). */
  retractSteering(sessionId, steeringId, options = {}) {
    return this.#json("DELETE", `${session(sessionId)}/steer/${segment(steeringId)}`, { query: { run: options.run } });
  }

  /** Answers a host-input request (POST /v1/sessions/{id}/respond); `answer` is any JSON value. */
  respond(sessionId, requestId, answer, options = {}) {
    return this.#json("POST", `${session(sessionId)}/respond`, { query: { run: options.run }, body: { request_id: requestId, answer } });
  }

  /** Cancels the active run, cooperatively and idempotently (POST /v1/sessions/{id}/cancel). */
  cancel(sessionId, options = {}) {
    return this.#json("POST", `${session(sessionId)}/cancel`, { query: { run: options.run } });
  }

  /** The open host-input requests of the active run (GET /v1/sessions/{id}/requests). */
  requests(sessionId, options = {}) {
    return this.#json("GET", `${session(sessionId)}/requests`, { query: { run: options.run } });
  }

  /**
   * Forks the session at a point into a new session (POST
   * /v1/sessions/{id}/fork): `{run, step?, into?}`; resolves to the new
   * session's ID and its parent. The same `into` at the same point answers
   * the fork made before.
   */
  fork(sessionId, point) {
    return this.#json("POST", `${session(sessionId)}/fork`, { body: pointBody(point, ["run", "step", "into"]) });
  }

  /** Makes the session go on from an earlier run or step (POST /v1/sessions/{id}/rewind): `{run, step?}`. */
  rewind(sessionId, point) {
    return this.#json("POST", `${session(sessionId)}/rewind`, { body: pointBody(point, ["run", "step"]) });
  }

  /**
   * The sessions forked from this one (GET /v1/sessions/{id}/forks), as
   * Temporal's visibility has them (a fork made a moment ago may be
   * missing): at most `limit` (default 100, at most 200), sorted by ID,
   * with `truncated` when there are more. A key limited to a prefix sees
   * only the forks under it.
   */
  forks(sessionId, options = {}) {
    return this.#json("GET", `${session(sessionId)}/forks`, { query: { limit: options.limit } });
  }

  /**
   * keel's schedules (GET /v1/schedules), sorted by ID, as Temporal's
   * visibility has them (one made a moment ago may be missing): at most
   * `limit` (default 50, at most 200), with `truncated` when more matched.
   */
  schedules(options = {}) {
    return this.#json("GET", "/v1/schedules", { query: { limit: options.limit } });
  }

  /**
   * Creates a schedule (POST /v1/schedules): `prompt` sent to a session at
   * the times of `cron`, every `every`, or both (docs/contract.md §22). A
   * keel worker checks it first; resolves to its description.
   */
  createSchedule(schedule) {
    return this.#json("POST", "/v1/schedules", { body: schedule });
  }

  /** A schedule's description: next firings, latest firings and their runs (GET /v1/schedules/{name}). */
  schedule(name) {
    return this.#json("GET", scheduleOf(name));
  }

  /** Changes a schedule: each field given replaces the schedule's (PATCH /v1/schedules/{name}). */
  updateSchedule(name, change) {
    return this.#json("PATCH", scheduleOf(name), { body: change });
  }

  /** Deletes a schedule; the sessions it made stay (DELETE /v1/schedules/{name}). */
  deleteSchedule(name) {
    return this.#json("DELETE", scheduleOf(name));
  }

  /** Pauses a schedule until unpause (POST /v1/schedules/{name}/pause), with an optional `note`. */
  pauseSchedule(name, options = {}) {
    return this.#json("POST", `${scheduleOf(name)}/pause`, { body: noteBody(options) });
  }

  /** Makes a paused schedule fire again (POST /v1/schedules/{name}/unpause), with an optional `note`. */
  unpauseSchedule(name, options = {}) {
    return this.#json("POST", `${scheduleOf(name)}/unpause`, { body: noteBody(options) });
  }

  /** Fires a schedule now (POST /v1/schedules/{name}/trigger); its firing shows in schedule(name).recent. */
  triggerSchedule(name) {
    return this.#json("POST", `${scheduleOf(name)}/trigger`);
  }

  /**
   * Starts an eval (POST /v1/evals, docs/evals.md): `cases` and recorded
   * `sessions` run under `candidate` and `baseline` and are scored.
   * Resolves to `{id}`; the same ID while it runs answers that eval.
   */
  startEval(input) {
    return this.#json("POST", "/v1/evals", { body: input });
  }

  /** An eval's progress: state, cases done, running, passed, failed, usage (GET /v1/evals/{eval}). */
  eval(id) {
    return this.#json("GET", evalOf(id));
  }

  /** An eval's report once it ended (GET /v1/evals/{eval}/report); a KeelError with status 409 while it runs. */
  evalReport(id) {
    return this.#json("GET", `${evalOf(id)}/report`);
  }

  /** Cancels an eval: no case starts, running cases' runs are cancelled (POST /v1/evals/{eval}/cancel). */
  cancelEval(id) {
    return this.#json("POST", `${evalOf(id)}/cancel`);
  }

  /**
   * request sends one call and returns the raw Response of a success; an
   * error answer becomes a typed KeelError.
   * @param {string} method
   * @param {string} path
   * `body` is sent as JSON; `data` is sent as it is, as `contentType`.
   * @param {{query?: Record<string, unknown>, body?: unknown, data?: BodyInit, contentType?: string, headers?: Record<string, string>, signal?: AbortSignal}} [init]
   * @returns {Promise<Response>}
   */
  async request(method, path, init = {}) {
    const url = new URL(this.baseURL + path);
    for (const [k, v] of Object.entries(init.query || {})) {
      if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    }
    const headers = { Accept: "application/json", ...this.headers, ...(init.headers || {}) };
    if (this.apiKey) headers.Authorization = `Bearer ${this.apiKey}`;
    /** @type {RequestInit} */
    const req = { method, headers, signal: init.signal };
    if (init.body !== undefined) {
      headers["Content-Type"] = "application/json";
      req.body = JSON.stringify(init.body);
    } else if (init.data !== undefined) {
      headers["Content-Type"] = init.contentType || "application/octet-stream";
      req.body = init.data;
    }
    let res;
    try {
      res = await this.fetch(url, req);
    } catch (err) {
      if (init.signal?.aborted) throw err;
      throw new ConnectionError(0, { code: "connection", message: `keel gateway ${this.baseURL}: ${err?.message || err}` }, { cause: err });
    }
    if (!res.ok) {
      let body;
      try { body = await res.json(); } catch { body = {}; }
      throw errorFrom(res.status, body, res.headers.get("Retry-After"));
    }
    return res;
  }

  async #json(method, path, init) {
    const res = await this.request(method, path, init);
    return res.json();
  }
}

/**
 * An open event stream: an async iterable of envelopes and lag notices.
 * `lastEventId` is the seq of the last durable event it yielded.
 */
export class EventStream {
  #client; #session; #opts; #abort = new AbortController(); #retry = 1000;

  constructor(client, sessionId, options) {
    this.#client = client;
    this.#session = sessionId;
    this.#opts = options;
    /** @type {string | undefined} */
    this.lastEventId = options.lastEventId !== undefined ? String(options.lastEventId) : undefined;
    /** How many times the stream reconnected. */
    this.reconnects = 0;
    if (options.signal) {
      if (options.signal.aborted) this.#abort.abort();
      else options.signal.addEventListener("abort", () => this.#abort.abort(), { once: true });
    }
  }

  /** Stops the stream; a loop over it ends. */
  close() { this.#abort.abort(); }

  async *[Symbol.asyncIterator]() {
    const reconnect = this.#opts.reconnect !== false;
    const max = this.#opts.maxReconnects ?? 10;
    let failures = 0;
    let connected = false;
    try {
      for (;;) {
        let err;
        try {
          for await (const item of this.#connect(() => { connected = true; })) {
            failures = 0;
            yield item;
          }
          err = new ConnectionError(0, { code: "connection", message: "keel gateway: the event stream ended" });
        } catch (e) {
          if (this.#abort.signal.aborted) return;
          err = e;
        }
        // What goes wrong before the first stream opened (a 404, a
        // refused connection) is the caller's to see; a stream that broke
        // later, or a retryable stream_error, is ours to mend.
        if (!reconnect || !connected || !(err instanceof KeelError) || !err.retryable || ++failures > max) throw err;
        this.reconnects++;
        await delay(this.#opts.reconnectDelay ?? (err.retryAfter !== undefined ? err.retryAfter * 1000 : this.#retry), this.#abort.signal);
        if (this.#abort.signal.aborted) return;
      }
    } finally {
      this.#abort.abort();
    }
  }

  async *#connect(opened) {
    const headers = { Accept: "text/event-stream" };
    let query = {};
    if (this.lastEventId !== undefined) headers["Last-Event-ID"] = this.lastEventId;
    else if (this.#opts.after !== undefined) query = { after: this.#opts.after };
    const res = await this.#client.request("GET", `${session(this.#session)}/events`,
      { query, headers, signal: this.#abort.signal });
    opened();
    let body = res.body;
    if (!body) throw new ConnectionError(0, { code: "connection", message: "keel gateway: an event stream without a body" });
    try {
      for await (const msg of parseSSE(body, (ms) => { this.#retry = ms; })) {
        const item = decode(msg);
        if (item === undefined) continue;
        if (item instanceof KeelError) throw item;
        if (msg.id !== undefined) this.lastEventId = msg.id;
        yield item;
      }
    } catch (err) {
      if (err instanceof KeelError || this.#abort.signal.aborted) throw err;
      throw new ConnectionError(0, { code: "connection", message: `keel gateway: the event stream broke: ${err?.message || err}` }, { cause: err });
    }
  }
}

// decode turns one SSE message into an envelope, a lag notice, or the
// stream_error's typed error; undefined for what it cannot read.
function decode(msg) {
  let data;
  try { data = JSON.parse(msg.data); } catch { return undefined; }
  if (msg.event === "stream_error") {
    const e = errorFrom(0, data);
    e.retryable = retryableStreamCodes.has(e.code) || data?.retryable === true;
    return e;
  }
  if (msg.event === "lag") return { type: "lag", missed: data.missed, last_seq: data.last_seq };
  if (!data || typeof data.type !== "string") return undefined;
  return data;
}

function delay(ms, signal) {
  return new Promise((resolve) => {
    if (signal.aborted || ms <= 0) return resolve();
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

function session(id) { return `/v1/sessions/${segment(id)}`; }

function evalOf(id) { return `/v1/evals/${segment(id)}`; }

function scheduleOf(name) { return `/v1/schedules/${segment(name)}`; }

// noteBody is the body of pause and unpause: a note, or nothing.
function noteBody(options) { return options.note !== undefined ? { note: options.note } : undefined; }

function segment(s) {
  if (typeof s !== "string" || s === "") throw new TypeError("keel: a session or steering ID must be a non-empty string");
  return encodeURIComponent(s);
}

/** Whether an envelope is durable (it has a seq). */
export function isDurable(event) { return typeof event?.seq === "number"; }

// pointBody keeps the fields a point route takes that are set: the
// gateway refuses unknown fields.
function pointBody(point, fields) {
  const body = {};
  for (const f of fields) {
    if (point?.[f] !== undefined) body[f] = point[f];
  }
  return body;
}

/** Whether an envelope ends a run (run.completed, run.cancelled, run.failed). */
export function isTerminal(event) {
  return event?.type === "run.completed" || event?.type === "run.cancelled" || event?.type === "run.failed";
}
