// keel's transcript reducer for the web page: a session's envelopes in,
// what a person watching it sees out. It follows the Go package
// github.com/keelrun/keel/transcript rule for rule (its doc.go lists them;
// docs/contract.md is their source), and the gateway's browser test
// replays transcript/testdata's recorded streams through both and checks
// them against the same expected views.
//
// Pure: no DOM, no globals but the one it defines (keelTranscript).
//   const t = keelTranscript.create();
//   const ch = keelTranscript.apply(t, envelope); // what changed, or ch.ignored
//   keelTranscript.view(t);                        // the view as plain JSON
"use strict";

(function (root) {
  // Limits of what the view keeps (transcript.MaxText, transcript.MaxField).
  const MAX_TEXT = 4 << 20;
  const MAX_FIELD = 256 << 10;
  const MAX_URLS = 100; // transcript.MaxURLs

  const KINDS = {
    "run.started": "run", "step.started": "step",
    "text.delta": "text", "reasoning.delta": "reasoning", "tool_call.delta": "draft",
    "provider.stream_reset": "reset", "provider.request_retry": "retry",
    "model_call.completed": "response", "usage.updated": "usage", "hosted_tool.activity": "hosted",
    "tool.proposed": "tool", "tool.started": "tool", "tool.detached": "tool", "tool.finished": "tool", "tool.progress": "tool",
    "host_input.requested": "question", "host_input.resolved": "question",
    "steering.accepted": "steering", "steering.applied": "steering", "steering.retracted": "steering",
    "compaction.started": "compaction", "compaction.completed": "compaction",
    "run.completed": "end", "run.cancelled": "end", "run.failed": "end",
    "session.forked": "session", "session.rewound": "session",
    "budget.warning": "budget", "model.waiting": "wait",
    "agent.started": "agent", "agent.finished": "agent",
    "boundary_input.applied": "hook", "hook.decided": "hook", "hook.failed": "hook",
  };
  const EPHEMERAL = new Set(["text.delta", "reasoning.delta", "tool_call.delta", "tool.progress", "model.waiting"]);

  // The data of each type as Go decodes it: i integer, s string, b bool,
  // u usage, c costs (a list of COST, keel.Costs), S a list of strings
  // (null items decode as ""), D duration (a Go
  // duration string or a number of milliseconds, keel.Duration, which
  // refuses null), d a duration that may be null (*keel.Duration), o
  // object, r any JSON. A field of another JSON type makes the event
  // undecodable; null and absent fields are zero.
  const USAGE = {input_tokens: "i", output_tokens: "i", cache_read_tokens: "i", cache_write_tokens: "i", reasoning_tokens: "i", web_searches: "i",
    requests: "i", cost: "c", unpriced: "i"};
  const COST = {currency: "s", nanos: "i", prices: "s"};
  const SHAPES = {
    "run.started": {number: "i", revision: "i", prompt: "s", model: "s"},
    "step.started": {step: "i", estimated_context_tokens: "i"},
    "run.completed": {revision: "i", text: "s", steps: "i", usage: "u"},
    "run.cancelled": {revision: "i"},
    "run.failed": {code: "s", message: "s", retryable: "b", revision: "i"},
    "usage.updated": {step: "i", attempt: "i", usage: "u", total: "u"},
    "model_call.completed": {step: "i", attempt: "i", metrics: "o"},
    "provider.stream_reset": {step: "i", attempt: "i", reason: "o"},
    "provider.request_retry": {step: "i", attempt: "i", kind: "s", status: "i", retry_after: "d", delay: "D", message: "s"},
    "hosted_tool.activity": {step: "i", attempt: "i", name: "s", id: "s", detail: "s", query: "s", urls: "S"},
    "text.delta": {step: "i", attempt: "i", text: "s"},
    "reasoning.delta": {step: "i", attempt: "i", text: "s"},
    "tool_call.delta": {step: "i", attempt: "i", index: "i", id: "s", name: "s", arguments: "s"},
    "tool.proposed": {tool_call_id: "s", name: "s", arguments: "r", step: "i"},
    "tool.started": {tool_call_id: "s", name: "s"},
    "tool.finished": {tool_call_id: "s", name: "s", status: "s", output: "s", duration: "D"},
    "tool.detached": {tool_call_id: "s", name: "s"},
    "tool.progress": {tool_call_id: "s", message: "s"},
    "steering.accepted": {steering_id: "s", text: "s"},
    "steering.applied": {steering_id: "s"},
    "steering.retracted": {steering_id: "s"},
    "host_input.requested": {request_id: "s", tool_call_id: "s", prompt: "s", schema: "r"},
    "host_input.resolved": {request_id: "s", tool_call_id: "s", interrupted: "b"},
    "compaction.started": {estimated_context_tokens: "i"},
    "compaction.completed": {messages_before: "i", messages_after: "i"},
    "session.forked": {source: "s", run: "i", step: "i", revision: "i", seq: "i", messages: "i"},
    "session.rewound": {from_run: "i", from_revision: "i", to_run: "i", to_step: "i", revision: "i", messages: "i"},
    "budget.warning": {step: "i", scope: "s", set: "s", currency: "s", limit: "i", spent: "i"},
    "agent.started": {tool_call_id: "s", agent: "s", session_id: "s", path: "s"},
    "agent.finished": {tool_call_id: "s", agent: "s", session_id: "s", path: "s", status: "s", steps: "i", usage: "u", error: "o"},
    "model.waiting": {step: "i", attempt: "i", limit: "s", wait: "D"},
    "boundary_input.applied": {input_id: "s", source: "s", point: "s", step: "i", text: "s"},
    "hook.decided": {hook: "s", point: "s", action: "s", reason: "s", tool_call_id: "s", arguments: "r"},
    "hook.failed": {hook: "s", point: "s", tool_call_id: "s", code: "s", message: "s", retryable: "b", continued: "b"},
  };

  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

  function fits(shape, v) {
    if (v === undefined || (v === null && shape !== "D")) return true;
    switch (shape) {
    case "i": return Number.isSafeInteger(v);
    case "s": return typeof v === "string";
    case "b": return typeof v === "boolean";
    case "d":
    case "D": return durationNanos(v) !== null;
    case "o": return isObject(v);
    case "u": return isObject(v) && Object.entries(USAGE).every(([k, s]) => fits(s, v[k]));
    case "c": return Array.isArray(v) && v.every((c) => c === null || (isObject(c) && Object.entries(COST).every(([k, s]) => fits(s, c[k]))));
    case "S": return Array.isArray(v) && v.every((x) => x === null || typeof x === "string");
    default: return true;
    }
  }

  // decode returns the event's data with every field of its shape
  // filled in (zero when absent), or null when it does not decode.
  function decode(type, data) {
    const shape = SHAPES[type];
    if (!shape) return isObject(data) ? data : {};
    if (data === null || data === undefined) data = {};
    if (!isObject(data)) return null;
    const zero = {i: 0, s: "", b: false, d: null, D: 0, o: null, u: null, c: null, S: null, r: null};
    const out = {};
    for (const [k, s] of Object.entries(shape)) {
      if (!fits(s, data[k])) return null;
      out[k] = data[k] === null || data[k] === undefined ? zero[s] : data[k];
    }
    return out;
  }

  // Go's duration units, in nanoseconds (time.ParseDuration's).
  const UNITS = {ns: 1n, us: 1000n, "\u00b5s": 1000n, "\u03bcs": 1000n, ms: 1000000n, s: 1000000000n,
    m: 60000000000n, h: 3600000000000n};
  const MAX_INT64 = (1n << 63n) - 1n;

  // parseDuration reads a duration string exactly as Go's
  // time.ParseDuration does, fractions in floating point as it computes
  // them: nanoseconds as a BigInt, or null where Go fails.
  function parseDuration(orig) {
    let s = orig;
    let neg = false;
    if (s !== "" && (s[0] === "-" || s[0] === "+")) {
      neg = s[0] === "-";
      s = s.slice(1);
    }
    if (s === "0") return 0n;
    if (s === "") return null;
    const digit = (c) => c >= "0" && c <= "9";
    let d = 0n;
    while (s !== "") {
      if (!(s[0] === "." || digit(s[0]))) return null;
      let i = 0;
      let v = 0n;
      while (i < s.length && digit(s[i])) {
        v = v * 10n + BigInt(s.charCodeAt(i) - 48);
        if (v > 1n << 63n) return null;
        i++;
      }
      const pre = i > 0;
      s = s.slice(i);
      let f = 0n;
      let scale = 1;
      let post = false;
      if (s !== "" && s[0] === ".") {
        s = s.slice(1);
        let overflow = false;
        i = 0;
        while (i < s.length && digit(s[i])) {
          if (!overflow) {
            if (f > MAX_INT64 / 10n) overflow = true;
            else {
              f = f * 10n + BigInt(s.charCodeAt(i) - 48);
              scale *= 10;
            }
          }
          i++;
        }
        post = i > 0;
        s = s.slice(i);
      }
      if (!pre && !post) return null;
      i = 0;
      while (i < s.length && s[i] !== "." && !digit(s[i])) i++;
      if (i === 0) return null;
      const unit = Object.prototype.hasOwnProperty.call(UNITS, s.slice(0, i)) ? UNITS[s.slice(0, i)] : null;
      s = s.slice(i);
      if (unit === null || v > (1n << 63n) / unit) return null;
      v *= unit;
      if (f > 0n) {
        v += BigInt(Math.trunc(Number(f) * (Number(unit) / scale)));
        if (v > 1n << 63n) return null;
      }
      d += v;
      if (d > 1n << 63n) return null;
    }
    if (neg) return -d;
    return d > MAX_INT64 ? null : d;
  }

  // durationNanos is a keel.Duration's value in nanoseconds (a BigInt), as
  // Go decodes it: a duration string, or a number of milliseconds; null
  // where Go fails (null itself among them).
  function durationNanos(v) {
    if (typeof v === "string") return parseDuration(v);
    if (typeof v !== "number" || !Number.isFinite(v)) return null;
    const ns = Math.trunc(v * 1e6);
    // Go's conversion of a float beyond int64 gives its least value.
    return Math.abs(ns) < 2 ** 63 ? BigInt(ns) : -(1n << 63n);
  }

  // utf8Length is the byte length of s in UTF-8, as Go counts it.
  function utf8Length(s) {
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) { n += 4; i++; }
      else n += 3;
    }
    return n;
  }

  // cut shortens s to at most n UTF-8 bytes, at a character boundary.
  function cut(s, n) {
    if (s.length * 3 <= n || utf8Length(s) <= n) return s;
    let bytes = 0;
    let i = 0;
    for (; i < s.length; i++) {
      const c = s.charCodeAt(i);
      const pair = c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
      const w = c < 0x80 ? 1 : c < 0x800 ? 2 : pair ? 4 : 3;
      if (bytes + w > n) break;
      bytes += w;
      if (pair) i++;
    }
    return s.slice(0, i);
  }

  // cutJSON keeps a JSON value up to MAX_FIELD bytes of JSON; a larger
  // one, or none, is null.
  function cutJSON(v) {
    if (v === undefined || v === null) return null;
    return utf8Length(JSON.stringify(v)) > MAX_FIELD ? null : v;
  }

  // usageOf is a decoded usage as transcript.Usage encodes it: cost (each
  // currency's nanos, and the table that priced it when named) only when
  // it has one, unpriced only when not zero (docs/contract.md §20.2).
  const usageOf = (u) => {
    const out = {};
    for (const [k, s] of Object.entries(USAGE)) {
      if (s === "i" && k !== "unpriced") out[k] = (u && u[k]) || 0;
    }
    const cost = u && Array.isArray(u.cost) ? u.cost : [];
    if (cost.length) out.cost = cost.map(costOf);
    if (u && u.unpriced) out.unpriced = u.unpriced;
    return out;
  };

  const costOf = (c) => {
    const out = {currency: (c && c.currency) || "", nanos: (c && c.nanos) || 0};
    if (c && c.prices) out.prices = c.prices;
    return out;
  };

  const ended = (status) => status === "completed" || status === "cancelled" || status === "failed";

  // create makes an empty transcript. forked (the session.forked event's
  // data, null until one) and rewinds (each session.rewound's, in order)
  // are the session's own facts, which belong to no run
  // (docs/contract.md §19), as transcript.View's Forked and Rewinds.
  function create() {
    return {last_seq: 0, ignored: {}, runs: [], forked: null, rewinds: [], _runs: new Map()};
  }

  function newRun(t, id) {
    const r = {id, number: 0, prompt: "", model: "", status: "running", steps: [], tools: [], questions: [], steering: [],
      usage: usageOf(null), compactions: 0, result: null, warnings: [], agents: [],
      _started: false, _steps: new Map(), _tools: new Map(), _questions: new Map(), _steering: new Map(), _agents: new Map()};
    t._runs.set(id, r);
    t.runs.push(r);
    return r;
  }

  const current = (r) => r.steps.length ? r.steps[r.steps.length - 1] : null;

  // apply reduces one envelope and returns what it changed: {kind,
  // ignored, event (its decoded data), run, step, text, draft, tool,
  // question, steering, agent, hosted, abandoned, discarded}; ignored is
  // "" when the event was applied.
  function apply(t, env) {
    env = isObject(env) ? env : {};
    const type = typeof env.type === "string" ? env.type : "";
    const ch = {kind: KINDS[type] || "other", ignored: "", event: null, run: null, step: null, text: "",
      draft: null, tool: null, question: null, steering: null, agent: null, hosted: null, abandoned: 0, discarded: false};
    const result = (why) => {
      if (why) {
        ch.ignored = why;
        t.ignored[why] = (t.ignored[why] || 0) + 1;
      }
      return ch;
    };
    const seq = Number.isSafeInteger(env.seq) ? env.seq : 0;
    const delta = EPHEMERAL.has(type) || (ch.kind === "other" && seq <= 0);
    if (!delta) {
      if (seq <= 0) return result("no_seq");
      if (seq <= t.last_seq) return result("repeat");
      t.last_seq = seq;
    }
    const d = decode(type, env.data);
    if (d === null) return result("undecodable");
    ch.event = d;
    switch (type) {
    case "session.forked":
      t.forked = d;
      return result("");
    case "session.rewound":
      t.rewinds.push(d);
      return result("");
    }
    const runID = typeof env.run_id === "string" ? env.run_id : "";
    let r = t._runs.get(runID);
    if (!r) {
      if (delta) return result("unknown_run");
      r = newRun(t, runID);
    }
    ch.run = r;
    if (ended(r.status)) return result("run_ended");
    if (delta && typeof env.path === "string" && env.path !== "") {
      // A child's delta relayed to its parent (docs/contract.md §21.4):
      // it goes to the child's card, never to the parent's own step.
      ch.kind = "agent";
      return result(relayed(r, env.path, type, d, ch));
    }
    const why = applyRun(r, type, d, ch);
    if (!ended(r.status)) {
      r.status = r.questions.some((q) => q.state === "open") ? "waiting_for_host_input" : "running";
    }
    return result(why);
  }

  function applyRun(r, type, d, ch) {
    switch (type) {
    case "run.started":
      if (r._started) return "duplicate";
      r._started = true;
      r.number = d.number;
      r.prompt = cut(d.prompt, MAX_FIELD);
      r.model = cut(d.model, MAX_FIELD);
      return "";
    case "step.started": {
      if (d.step < 1) return "invalid";
      if (r._steps.has(d.step)) return "duplicate";
      const st = {number: d.step, estimated_context_tokens: d.estimated_context_tokens, attempt: 1, text: "", reasoning: "",
        drafts: [], abandoned: [], completed: false, truncated: false, waiting: null, hosted: [], _abandonedMax: 0};
      r._steps.set(d.step, st);
      r.steps.push(st);
      ch.step = st;
      return "";
    }
    case "text.delta":
    case "reasoning.delta": {
      const [st, why] = live(r, d.step, d.attempt, d.text === "", ch);
      if (why) return why;
      const field = type === "text.delta" ? "text" : "reasoning";
      st[field] = appendText(st, st[field], d.text);
      st.waiting = null;
      ch.text = d.text;
      return "";
    }
    case "tool_call.delta": {
      if (d.index < 0) return "invalid";
      const [st, why] = live(r, d.step, d.attempt, d.id === "" && d.name === "" && d.arguments === "", ch);
      if (why) return why;
      let dr = st.drafts.find((x) => x.index === d.index);
      if (!dr) {
        dr = {index: d.index, id: "", name: "", arguments: ""};
        st.drafts.push(dr);
      }
      if (d.id) dr.id = cut(d.id, MAX_FIELD);
      if (d.name) dr.name = cut(d.name, MAX_FIELD);
      dr.arguments = appendText(st, dr.arguments, d.arguments);
      ch.draft = dr;
      st.waiting = null;
      return "";
    }
    case "model.waiting": {
      const ns = durationNanos(d.wait);
      if (ns < 0n) return "invalid";
      const [st, why] = live(r, d.step, d.attempt, ns === 0n, ch);
      if (why) return why;
      // An attempt that streamed output is no longer waiting.
      if (st.attempt === d.attempt && (st.text !== "" || st.reasoning !== "" || st.drafts.length > 0)) return "streaming";
      st.waiting = {limit: cut(d.limit, MAX_FIELD), wait_ms: Number(ns / 1000000n)};
      return "";
    }
    case "provider.stream_reset": {
      if (d.step < 1 || d.attempt < 1) return "invalid";
      const st = r._steps.get(d.step);
      if (!st) return "";
      ch.step = st;
      if (st.abandoned.includes(d.attempt)) return "duplicate";
      st.abandoned.push(d.attempt);
      st._abandonedMax = Math.max(st._abandonedMax, d.attempt);
      if (d.attempt >= st.attempt) abandon(st, d.attempt + 1, ch);
      return "";
    }
    case "model_call.completed": {
      const st = r._steps.get(d.step);
      if (!st || d.attempt < st.attempt || d.attempt <= st._abandonedMax) return "";
      ch.step = st;
      if (d.attempt > st.attempt) abandon(st, d.attempt, ch);
      st.completed = true;
      st.waiting = null;
      return "";
    }
    case "hosted_tool.activity":
      return hosted(r, d, ch);
    case "provider.request_retry":
      ch.step = r._steps.get(d.step) || null;
      return "";
    case "compaction.completed":
      r.compactions++;
      return "";
    case "usage.updated":
      r.usage = usageOf(d.total);
      ch.step = r._steps.get(d.step) || null;
      return "";
    case "budget.warning": {
      ch.step = r._steps.get(d.step) || null;
      const w = Object.assign({}, d, {scope: cut(d.scope, MAX_FIELD), set: cut(d.set, MAX_FIELD), currency: cut(d.currency, MAX_FIELD)});
      // One warning per run and limit.
      if (r.warnings.some((x) => x.scope === w.scope && x.set === w.set && x.currency === w.currency)) return "duplicate";
      r.warnings.push(w);
      return "";
    }
    case "tool.proposed": {
      if (r._tools.has(d.tool_call_id)) {
        ch.tool = r._tools.get(d.tool_call_id);
        return "duplicate";
      }
      const tc = tool(r, d.tool_call_id, d.name);
      if (d.step > 0) tc.step = d.step;
      tc.arguments = cutJSON(d.arguments);
      ch.tool = tc;
      const st = r._steps.get(tc.step);
      if (st) st.drafts = [];
      return "";
    }
    case "tool.started":
    case "tool.detached": {
      const s = type === "tool.started" ? "running" : "detached";
      const tc = tool(r, d.tool_call_id, d.name);
      ch.tool = tc;
      if (tc.finished) return "call_finished";
      if (tc.state === s || tc.state === "detached") return "duplicate";
      tc.state = s;
      return "";
    }
    case "tool.finished": {
      const tc = tool(r, d.tool_call_id, d.name);
      ch.tool = tc;
      if (tc.finished) return "duplicate";
      tc.state = cut(d.status, MAX_FIELD);
      tc.finished = true;
      tc.output = cut(d.output, MAX_FIELD);
      tc.progress = "";
      return "";
    }
    case "tool.progress": {
      const tc = r._tools.get(d.tool_call_id);
      if (!tc) return "unknown_call";
      if (tc.finished) return "call_finished";
      ch.tool = tc;
      tc.progress = cut(d.message, MAX_FIELD);
      return "";
    }
    case "host_input.requested": {
      if (r._questions.has(d.request_id)) {
        ch.question = r._questions.get(d.request_id);
        return "duplicate";
      }
      const q = {request_id: d.request_id, tool_call_id: d.tool_call_id, prompt: cut(d.prompt, MAX_FIELD),
        schema: cutJSON(d.schema), state: "open"};
      r._questions.set(d.request_id, q);
      r.questions.push(q);
      ch.question = q;
      return "";
    }
    case "host_input.resolved": {
      let q = r._questions.get(d.request_id);
      if (!q) {
        q = {request_id: d.request_id, tool_call_id: d.tool_call_id, prompt: "", schema: null, state: ""};
        r._questions.set(d.request_id, q);
        r.questions.push(q);
      } else if (q.state !== "open") {
        ch.question = q;
        return "duplicate";
      }
      q.state = d.interrupted ? "interrupted" : "answered";
      ch.question = q;
      return "";
    }
    case "steering.accepted": {
      if (r._steering.has(d.steering_id)) {
        ch.steering = r._steering.get(d.steering_id);
        return "duplicate";
      }
      ch.steering = steer(r, d.steering_id);
      ch.steering.text = cut(d.text, MAX_FIELD);
      return "";
    }
    case "steering.applied":
    case "steering.retracted": {
      const s = r._steering.get(d.steering_id) || steer(r, d.steering_id);
      ch.steering = s;
      if (s.state !== "staged") return "duplicate";
      s.state = type === "steering.applied" ? "applied" : "retracted";
      return "";
    }
    case "agent.started": {
      let a = r._agents.get(d.path);
      if (a) {
        ch.agent = a;
        if (a.tool_call_id !== "") return "duplicate";
      }
      a = agent(r, d.path);
      a.tool_call_id = cut(d.tool_call_id, MAX_FIELD);
      a.agent = cut(d.agent, MAX_FIELD);
      a.session_id = cut(d.session_id, MAX_FIELD);
      if (a.status === "") a.status = "active";
      ch.agent = a;
      return "";
    }
    case "agent.finished": {
      const a = agent(r, d.path);
      ch.agent = a;
      if (a.status !== "" && a.status !== "active") return "duplicate";
      a.status = cut(d.status, MAX_FIELD);
      a.usage = usageOf(d.usage);
      if (d.error) {
        a.error = {code: cut(typeof d.error.code === "string" ? d.error.code : "", MAX_FIELD),
          message: cut(typeof d.error.message === "string" ? d.error.message : "", MAX_FIELD)};
      }
      if (a.tool_call_id === "") {
        a.tool_call_id = cut(d.tool_call_id, MAX_FIELD);
        a.agent = cut(d.agent, MAX_FIELD);
        a.session_id = cut(d.session_id, MAX_FIELD);
      }
      // The parent could not start the child: no session is its.
      if (!d.session_id) a.session_id = "";
      return "";
    }
    case "run.completed":
      stopWaiting(r);
      r.status = "completed";
      r.result = result({text: cut(d.text, MAX_FIELD), steps: d.steps, usage: usageOf(d.usage), revision: d.revision});
      return "";
    case "run.cancelled":
      stopWaiting(r);
      r.status = "cancelled";
      r.result = result({revision: d.revision});
      return "";
    case "run.failed":
      stopWaiting(r);
      r.status = "failed";
      r.result = result({code: cut(d.code, MAX_FIELD), message: cut(d.message, MAX_FIELD), retryable: d.retryable, revision: d.revision});
      return "";
    }
    return "";
  }

  const result = (o) => Object.assign({text: "", steps: 0, usage: usageOf(null), code: "", message: "", retryable: false, revision: 0}, o);

  // live finds the step a delta belongs to, if it belongs to the live
  // attempt of the current step, making a later attempt the live one.
  function live(r, step, attempt, empty, ch) {
    if (step < 1 || attempt < 1) return [null, "invalid"];
    const st = current(r);
    if (!st || st.number !== step) return [null, "other_step"];
    ch.step = st;
    if (attempt < st.attempt || attempt <= st._abandonedMax) return [null, "abandoned_attempt"];
    if (st.completed) return [null, "response_complete"];
    if (empty) return [null, "empty"];
    if (attempt > st.attempt) abandon(st, attempt, ch);
    return [st, ""];
  }

  // abandon drops the live attempt's output, and the uses of hosted tools
  // of every attempt before next; next becomes the live attempt.
  function abandon(st, next, ch) {
    ch.abandoned = st.attempt;
    ch.discarded = st.text !== "" || st.reasoning !== "" || st.drafts.length > 0;
    const kept = st.hosted.filter((h) => h.attempt >= next);
    if (kept.length < st.hosted.length) ch.discarded = true;
    st.hosted = kept;
    st.attempt = next;
    st.text = "";
    st.reasoning = "";
    st.drafts = [];
    st.completed = false;
    st.waiting = null;
  }

  // hosted adds a use of a hosted tool to its step (transcript.Run.hosted):
  // output of its attempt, so one of an attempt reset or superseded is
  // not shown; a second use with the same ID is a duplicate; one of a step
  // never started shows nothing. URLs are kept up to MAX_URLS, and while
  // their UTF-8 bytes together fit in MAX_FIELD.
  function hosted(r, d, ch) {
    if (d.step < 1 || d.attempt < 1) return "invalid";
    const st = r._steps.get(d.step);
    if (!st) return "";
    ch.step = st;
    if (d.attempt < st.attempt || d.attempt <= st._abandonedMax) return "abandoned_attempt";
    const id = cut(d.id, MAX_FIELD);
    const dup = id !== "" ? st.hosted.find((h) => h.id === id) : undefined;
    if (dup) {
      ch.hosted = dup;
      return "duplicate";
    }
    const h = {attempt: d.attempt, name: cut(d.name, MAX_FIELD), id, detail: cut(d.detail, MAX_FIELD),
      query: cut(d.query, MAX_FIELD), urls: [], truncated: false};
    let size = 0;
    for (const u of d.urls || []) {
      const s = u === null ? "" : u;
      const n = utf8Length(s);
      if (h.urls.length === MAX_URLS || size + n > MAX_FIELD) {
        h.truncated = true;
        break;
      }
      size += n;
      h.urls.push(s);
    }
    st.hosted.push(h);
    ch.hosted = h;
    return "";
  }

  // stopWaiting clears the wait of the run's current step: an ended run
  // waits for nothing.
  function stopWaiting(r) {
    const st = current(r);
    if (st) st.waiting = null;
  }

  function appendText(st, s, more) {
    const joined = s + more;
    if (joined.length * 3 <= MAX_TEXT) return joined;
    const cutText = cut(joined, MAX_TEXT);
    if (cutText.length < joined.length) st.truncated = true;
    return cutText;
  }

  function tool(r, id, name) {
    let tc = r._tools.get(id);
    if (tc) return tc;
    const st = current(r);
    tc = {id, name: cut(name, MAX_FIELD), step: st ? st.number : 0, arguments: null, state: "proposed", progress: "", output: "", finished: false};
    r._tools.set(id, tc);
    r.tools.push(tc);
    return tc;
  }

  // agent returns the card of the child at path, making one first.
  function agent(r, path) {
    path = cut(path, MAX_FIELD);
    let a = r._agents.get(path);
    if (a) return a;
    a = newAgent(path, "");
    r._agents.set(path, a);
    r.agents.push(a);
    return a;
  }

  function newAgent(path, status) {
    return {tool_call_id: "", agent: "", session_id: "", path, status, text: "", usage: usageOf(null), error: null,
      nested: [], truncated: false, _nested: new Map(), _step: 0, _att: 0, _stepBegins: 0};
  }

  // relayed applies a child's delta to its card (transcript.Run.relayed):
  // the card of the path's first segment, or a nested card below it.
  function relayed(r, path, type, d, ch) {
    const segs = path.split("/");
    let a = r._agents.get(segs[0]);
    if (!a) return "unknown_run";
    if (a.status !== "active") return "run_ended";
    for (const seg of segs.slice(1)) {
      let c = a._nested.get(seg);
      if (!c) {
        c = newAgent(a.path + "/" + cut(seg, MAX_FIELD), "active");
        a._nested.set(seg, c);
        a.nested.push(c);
      }
      a = c;
    }
    ch.agent = a;
    if (type !== "text.delta") return "";
    const {step, attempt, text} = d;
    if (step < 1 || attempt < 1) return "invalid";
    if (text === "") return "empty";
    if (step < a._step || (step === a._step && attempt < a._att)) return "abandoned_attempt";
    if (step > a._step) {
      a._step = step;
      a._att = attempt;
      a._stepBegins = a.text.length;
      if (a.text !== "") {
        a.text += "\n";
        a._stepBegins = a.text.length;
      }
    } else if (attempt > a._att) {
      a._att = attempt;
      a.text = a.text.slice(0, a._stepBegins);
      ch.discarded = true;
    }
    const joined = a.text + text;
    if (utf8Length(joined) > MAX_TEXT) a.truncated = true;
    a.text = cut(joined, MAX_TEXT);
    ch.text = text;
    return "";
  }

  function steer(r, id) {
    const s = {id, text: "", state: "staged"};
    r._steering.set(id, s);
    r.steering.push(s);
    return s;
  }

  // omitZero drops the fields Go's omitempty leaves out when zero.
  const omitZero = (o, ...keys) => {
    const out = Object.assign({}, o);
    for (const k of keys) if (out[k] === 0) delete out[k];
    return out;
  };

  // omitEmpty drops the string fields Go's omitempty leaves out when "".
  const omitEmpty = (o, ...keys) => {
    const out = Object.assign({}, o);
    for (const k of keys) if (out[k] === "") delete out[k];
    return out;
  };

  // stepView is a step as transcript.Step encodes it: waiting only while
  // it waits, a hosted tool's truncated only when set.
  function stepView(st) {
    const out = Object.assign({}, st);
    if (!st.waiting) delete out.waiting;
    out.hosted = st.hosted.map((h) => {
      const o = Object.assign({}, h);
      if (!h.truncated) delete o.truncated;
      return o;
    });
    return out;
  }

  // runView is a run as transcript.Run encodes it: warnings only when it
  // has some, a token budget's (empty) currency left out.
  function runView(r) {
    const out = Object.assign({}, r);
    out.steps = r.steps.map(stepView);
    if (r.warnings.length) out.warnings = r.warnings.map((w) => omitEmpty(w, "currency"));
    else delete out.warnings;
    if (r.agents.length) out.agents = r.agents.map(agentView);
    else delete out.agents;
    return out;
  }

  // agentView is a child's card as transcript.Agent encodes it: error,
  // nested and truncated only when set.
  function agentView(a) {
    const out = Object.assign({}, a);
    if (!a.error) delete out.error;
    if (a.nested.length) out.nested = a.nested.map(agentView);
    else delete out.nested;
    if (!a.truncated) delete out.truncated;
    return out;
  }

  // view is the transcript as plain JSON, as transcript.View encodes it:
  // forked and rewinds only when the session has them, a run point's step
  // (0) left out.
  function view(t) {
    const v = {last_seq: t.last_seq, ignored: t.ignored, runs: t.runs.map(runView)};
    if (t.forked) v.forked = omitZero(t.forked, "step");
    if (t.rewinds.length) v.rewinds = t.rewinds.map((r) => omitZero(r, "to_step"));
    return JSON.parse(JSON.stringify(v, (k, val) => (k.startsWith("_") ? undefined : val)));
  }

  // formatNanos formats an amount in nanos (billionths of a currency's
  // unit, an integer) as a decimal of the unit, as keel.FormatNanos does:
  // at least two decimals, at most nine, no trailing zeros past the
  // second. Integer arithmetic only, so no float error creeps in
  // (docs/contract.md §20.1); "" for what is not a safe integer.
  function formatNanos(n) {
    if (!Number.isSafeInteger(n)) return "";
    const sign = n < 0 ? "-" : "";
    const a = Math.abs(n);
    const rem = a % 1e9;
    const whole = (a - rem) / 1e9;
    let frac = String(rem).padStart(9, "0").replace(/0+$/, "");
    while (frac.length < 2) frac += "0";
    return sign + whole + "." + frac;
  }

  // reduce applies every envelope; it returns what each did ("kind" or
  // "kind!reason") and the view, as testdata/*.expect.json hold them.
  function reduce(envs) {
    const t = create();
    const changes = envs.map((env) => {
      const ch = apply(t, env);
      return ch.ignored ? ch.kind + "!" + ch.ignored : ch.kind;
    });
    return {changes, view: view(t)};
  }

  root.keelTranscript = Object.freeze({create, apply, view, reduce, current, formatNanos, durationNanos});
})(globalThis);
