// keel's web page: lists sessions, opens one, follows its event stream and
// drives its runs through the gateway's /v1 API (docs/gateway.md).
//
// The rendered log is the session's durable events, one element each with
// a data-seq attribute, in sequence order; live deltas (text, reasoning,
// tool-call assembly, tool progress) fill in between them. What counts is
// the transcript reducer's to say (transcript.js, the Go package
// transcript's rules): repeats and deltas that are not the live attempt's
// draw nothing, and provider.stream_reset drops the abandoned attempt's
// text (docs/contract.md §4.5). The stream is read with fetch, so it can carry the API
// key, and reconnects by itself with Last-Event-ID. The durable events
// rendered are kept in sessionStorage, so a reload shows them again and
// resumes the stream after the last one: no event shown twice, none
// skipped.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);

  // page is what the page shows and follows.
  const page = {
    session: null,   // the open session's ID
    lastSeq: 0,      // the last durable sequence rendered
    events: [],      // the durable envelopes rendered (cached per tab)
    stream: null,    // the AbortController of the open event stream
    retryTimer: 0,
    failures: 0,     // stream failures in a row, for the back-off
    streamError: null,
    webUI: "",
    namespace: "",
    live: new Map(), // "run|step|attempt|kind|index" -> element of live text
    tr: keelTranscript.create(), // the reduced view of the events rendered
    saveTimer: 0,
    stateTimer: 0,
    runUsage: null,
  };

  // el builds an element: attrs are attributes (class, data-*), children
  // strings (as text, never HTML) or nodes.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null && v !== false) node.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null) continue;
      node.append(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    }
    return node;
  }

  // The API.

  // The API key is kept for this tab only (sessionStorage): it is not
  // left on the disk for every later visitor of the browser profile. A
  // key an older page kept in localStorage moves here once.
  const keyName = "keel.apiKey";
  try {
    const old = localStorage.getItem(keyName);
    if (old !== null) {
      if (!sessionStorage.getItem(keyName)) sessionStorage.setItem(keyName, old);
      localStorage.removeItem(keyName);
    }
  } catch {
    // Storage is off: the key field is empty, and asked for again.
  }

  function apiKey() { return sessionStorage.getItem(keyName) || ""; }

  function headers(extra) {
    const h = Object.assign({}, extra);
    const key = apiKey();
    if (key) h.Authorization = "Bearer " + key;
    return h;
  }

  // apiError turns an error response into an Error with the gateway's code.
  async function apiError(resp) {
    const text = await resp.text();
    let body = {};
    try { body = JSON.parse(text); } catch { body = {message: text || resp.statusText}; }
    const err = new Error(body.message || resp.statusText);
    err.status = resp.status;
    err.code = body.code || "";
    return err;
  }

  async function call(method, path, body) {
    const init = {method, headers: headers(body === undefined ? {} : {"Content-Type": "application/json"})};
    if (body !== undefined) init.body = JSON.stringify(body);
    const resp = await fetch(path, init);
    if (!resp.ok) throw await apiError(resp);
    const text = await resp.text();
    return text ? JSON.parse(text) : null;
  }

  const sessionPath = (id) => "/v1/sessions/" + encodeURIComponent(id);

  function showError(err) {
    const p = $("error");
    p.textContent = err ? (err.code ? err.code + ": " : "") + err.message : "";
    p.hidden = !err;
  }

  // Sessions.

  async function loadSessions() {
    const box = $("sessions-error");
    try {
      const data = await call("GET", "/v1/sessions?limit=100");
      page.webUI = data.web_ui || "";
      page.namespace = data.namespace || "";
      const items = data.sessions.map((s) => {
        // keel's state, not Temporal's: a session between runs is a
        // running workflow waiting for its next prompt.
        const open = el("button", {type: "button", class: "open-session"}, el("span", {class: "sid"}, s.id),
          el("span", {class: "status", "data-state": s.state}, stateLabel(s.state)));
        open.addEventListener("click", () => openSession(s.id));
        return el("li", {"data-session": s.id, class: s.id === page.session ? "current" : null}, open);
      });
      $("sessions").replaceChildren(...items);
      box.hidden = true;
      updateLinks();
    } catch (err) {
      box.textContent = (err.status === 401 ? "Enter the gateway's API key above. " : "") + err.message;
      box.hidden = false;
    }
  }

  // workflowURL is the Temporal Web UI's page of a workflow, "" when the
  // gateway does not know the UI.
  function workflowURL(workflowID) {
    if (!page.webUI || !page.namespace) return "";
    return page.webUI + "/namespaces/" + encodeURIComponent(page.namespace) + "/workflows/" + encodeURIComponent(workflowID);
  }

  function updateLinks() {
    const link = $("temporal-link");
    const href = page.session ? workflowURL(page.session) : "";
    link.hidden = !href;
    if (href) link.href = href;
    for (const a of document.querySelectorAll("a.temporal-run")) {
      const url = workflowURL(a.dataset.workflow);
      a.hidden = !url;
      if (url) a.href = url;
    }
  }

  // Hooks of the other views (schedules.js, evals.js): told when a
  // session opens (the view closes), when another view opens, and when
  // the API key changes.
  const sessionHooks = [];
  const viewHooks = [];
  const keyHooks = [];

  // viewOpened tells the views that view name took the main pane.
  function viewOpened(name) {
    for (const h of viewHooks) h(name);
  }

  function openSession(id) {
    for (const h of sessionHooks) h(id);
    stopStream();
    saveCache();
    clearTimeout(page.stateTimer);
    page.session = id;
    sessionUsage = null;
    page.live.clear();
    page.tr = keelTranscript.create();
    page.events = [];
    page.lastSeq = 0;
    page.runUsage = null;
    page.streamError = null;
    page.failures = 0;
    if (decodeURIComponent(location.hash.replace(/^#session=/, "")) !== id) {
      history.replaceState(null, "", "#session=" + encodeURIComponent(id));
    }
    $("log").replaceChildren();
    showError(null);
    $("empty").hidden = true;
    $("session").hidden = false;
    $("session-id").textContent = id;
    $("usage").textContent = "";
    showParent(null);
    showForks(null);
    $("cancel").hidden = true; // until the session's state says a run is active
    for (const li of document.querySelectorAll("#sessions li")) {
      li.classList.toggle("current", li.dataset.session === id);
    }
    updateLinks();
    for (const env of loadCache(id)) renderDurable(env);
    refreshState().then((st) => {
      if (id !== page.session) return;
      if (st === null || (st && !st.active_run && st.last_seq < page.lastSeq)) {
        // A new session, or one recreated under the same ID since this
        // tab cached its log: start over.
        if (page.events.length) resetLog();
        if (st === null) return; // its first prompt creates it; the stream opens then
      }
      startStream(false);
    });
  }

  function resetLog() {
    page.events = [];
    page.lastSeq = 0;
    page.tr = keelTranscript.create();
    page.live.clear();
    $("log").replaceChildren();
    sessionStorage.removeItem(cacheKey(page.session));
  }

  // refreshState shows the session's state and usage; it resolves to the
  // state, null for a session that does not exist yet, undefined when the
  // gateway could not say.
  async function refreshState() {
    const id = page.session;
    try {
      const st = await call("GET", sessionPath(id));
      if (id === page.session) {
        setBadge(st.state, !!st.active_run);
        showUsage(st.usage);
        showParent(st.parent);
        refreshForks(id);
      }
      return st;
    } catch (err) {
      if (err.status === 404) {
        if (id === page.session) setBadge("new", false);
        return null;
      }
      if (id === page.session) showError(err);
      return undefined;
    }
  }

  // refreshStateSoon coalesces the refreshes of a burst of events, and
  // asks again while the state disagrees with the log (ready(state) is
  // false): the session's state query can trail the run's events.
  function refreshStateSoon(ready) {
    clearTimeout(page.stateTimer);
    const session = page.session;
    let tries = 0;
    const check = async () => {
      const st = await refreshState();
      if (session !== page.session || !st || !ready || ready(st) || ++tries >= 30) return;
      page.stateTimer = setTimeout(check, 300);
    };
    page.stateTimer = setTimeout(check, 100);
  }

  // isOpen reports whether a question is still waiting for its answer.
  const isOpen = (runID, requestID) => !!inRun(runID, '.question[data-open="true"][data-request="' + CSS.escape(requestID) + '"]');

  const stateLabel = (s) => String(s).replaceAll("_", " ");

  // setBadge shows the session's state, and offers Cancel only while a
  // run is active: there is nothing to cancel in an idle or ended session.
  function setBadge(s, active) {
    const b = $("state");
    b.textContent = stateLabel(s);
    b.dataset.state = s;
    $("cancel").hidden = !active;
  }

  // Lineage, fork and rewind (docs/contract.md §19).

  const isCount = (n) => Number.isSafeInteger(n) && n >= 0;

  // pointLabel names a point of a session: after run N, or after step K
  // of run N.
  const pointLabel = (run, step) => (isCount(step) && step > 0 ? "step " + step + " of " : "") + "run " + run;

  // sessionLink is a link that opens another session of this gateway.
  function sessionLink(id) {
    const a = el("a", {class: "session-link", href: "#session=" + encodeURIComponent(id)}, id);
    a.addEventListener("click", (e) => {
      e.preventDefault();
      openSession(id);
    });
    return a;
  }

  // showParent shows where the open session was forked from (its
  // SessionStatus's parent), or nothing for a session that is no fork.
  // A source the API key may not see comes with an empty ID.
  function showParent(parent) {
    const p = $("lineage");
    const ok = parent && typeof parent === "object" && typeof parent.source === "string" && isCount(parent.run);
    p.hidden = !ok;
    if (!ok) {
      p.replaceChildren();
      return;
    }
    p.replaceChildren("forked from ", sourceLabel(parent.source), " after " + pointLabel(parent.run, parent.step));
    p.dataset.source = parent.source;
  }

  // sourceLabel names a fork's source: a link that opens it, or, when the
  // gateway withheld its ID (a key limited to a prefix that does not
  // cover it), words that say so.
  function sourceLabel(source) {
    return source === "" ? "a session outside this key's prefix" : sessionLink(source);
  }

  // refreshForks lists the forks of session id (GET .../forks) and shows
  // them while it is open. A fork made a moment ago can be missing until
  // Temporal's visibility has it: the list is asked again with the
  // session's state. An error leaves the list as it was.
  async function refreshForks(id) {
    let list;
    try {
      list = await call("GET", sessionPath(id) + "/forks");
    } catch {
      return;
    }
    if (id === page.session) showForks(list);
  }

  // showForks shows the open session's forks as links that open them (a
  // ForksResponse), or nothing when it has none.
  function showForks(list) {
    const p = $("forks");
    const ids = list && Array.isArray(list.forks) ?
      list.forks.map((f) => f && f.session_id).filter((id) => typeof id === "string" && id !== "") : [];
    p.hidden = ids.length === 0;
    if (!ids.length) {
      p.replaceChildren();
      delete p.dataset.forks;
      return;
    }
    const parts = [ids.length === 1 ? "fork: " : "forks: "];
    ids.forEach((id, i) => parts.push(i ? ", " : "", sessionLink(id)));
    if (list.truncated === true) parts.push(", and more");
    p.replaceChildren(...parts);
    p.dataset.forks = String(ids.length);
  }

  // pointActions are the "fork from here" and "rewind to here" buttons of
  // a run or a step of it: disabled until the run has ended, as a point
  // inside an active run is not committed.
  function pointActions(run, step) {
    const fork = el("button", {type: "button", class: "fork-here", disabled: true, title: "A new session from this point"},
      "Fork from here");
    const rewind = el("button", {type: "button", class: "rewind-here danger", disabled: true,
      title: "Go back to this point in this session"}, "Rewind to here");
    fork.addEventListener("click", () => forkAt(run, step, fork));
    rewind.addEventListener("click", () => rewindTo(run, step, rewind));
    return el("span", {class: "point-actions", "data-point-run": run, "data-point-step": step || null}, fork, rewind);
  }

  function pointBody(run, step) {
    const body = {run};
    if (step > 0) body.step = step;
    return body;
  }

  async function forkAt(run, step, button) {
    const source = page.session;
    if (!source || !isCount(run)) return;
    showError(null);
    button.disabled = true;
    try {
      const r = await call("POST", sessionPath(source) + "/fork", pointBody(run, step));
      if (!r || typeof r.session_id !== "string" || !r.session_id) throw new Error("the gateway answered no session_id");
      if (page.session !== source) return;
      openSession(r.session_id);
      loadSessions();
    } catch (err) {
      if (page.session === source) showError(err);
    } finally {
      button.disabled = false;
    }
  }

  async function rewindTo(run, step, button) {
    const id = page.session;
    if (!id || !isCount(run)) return;
    const ok = window.confirm("Rewind " + id + " to after " + pointLabel(run, step) + "? " +
      "The runs after it stay in the log, but leave the model's history: the next prompt goes on from this point.");
    if (!ok) return;
    showError(null);
    button.disabled = true;
    try {
      await call("POST", sessionPath(id) + "/rewind", pointBody(run, step));
      // The session.rewound event comes on the stream; reading the view
      // again also brings the state and the badge up to date.
      if (page.session === id) openSession(id);
    } catch (err) {
      if (page.session === id) showError(err);
    } finally {
      button.disabled = false;
    }
  }

  // enablePoints offers fork and rewind on an ended run and its steps.
  function enablePoints(runID) {
    const sel = '[data-run="' + CSS.escape(runID) + '"]:not([data-left]) .point-actions button';
    for (const b of document.querySelectorAll(sel)) b.disabled = false;
  }

  // markLeft marks the runs (and steps) after a rewind's point: they stay
  // in the log but are gone from the model's history.
  function markLeft(toRun, toStep) {
    for (const node of document.querySelectorAll("#log .ev[data-point-run]")) {
      const run = Number(node.dataset.pointRun);
      const step = Number(node.dataset.pointStep || 0);
      if (run > toRun || (run === toRun && toStep > 0 && step > toStep)) {
        node.dataset.left = "true";
        for (const b of node.querySelectorAll(".point-actions button")) b.disabled = true;
      }
    }
  }

  let sessionUsage = null;

  function showUsage(u) {
    if (u) sessionUsage = u;
    const parts = [];
    if (sessionUsage) parts.push("session " + tokens(sessionUsage));
    if (page.runUsage) parts.push("this run " + tokens(page.runUsage));
    $("usage").textContent = parts.join(" · ");
    $("usage").title = pricesOf(sessionUsage, page.runUsage);
  }

  // tokens is a usage line: "1200 in / 50 out, 3 requests · 0.0123 USD",
  // or "…, 3 requests, 2 web searches · 0.0323 USD",
  // the cost "≥" when some requests had no price (docs/contract.md §20).
  // Hosted web searches, billed per search, follow the requests.
  function tokens(u) {
    const searches = u.web_searches > 0 ? ", " + u.web_searches + (u.web_searches === 1 ? " web search" : " web searches") : "";
    return (u.input_tokens || 0) + " in / " + (u.output_tokens || 0) + " out, " +
      (u.requests || 0) + (u.requests === 1 ? " request" : " requests") + searches + cost(u);
  }

  // cost is " · 0.0123 USD" (one part per currency, never converted), or
  // "" when no request had a price.
  function cost(u) {
    const list = Array.isArray(u.cost) ? u.cost.filter((c) => c && typeof c.currency === "string") : [];
    if (!list.length) return "";
    return " · " + (u.unpriced > 0 ? "≥ " : "") +
      list.map((c) => keelTranscript.formatNanos(c.nanos) + " " + c.currency).join(" + ");
  }

  // pricesOf names the price tables the usages' costs came from: an
  // estimate from list prices, never a bill.
  function pricesOf(...usages) {
    const names = new Set();
    for (const u of usages) {
      for (const c of (u && Array.isArray(u.cost) ? u.cost : [])) if (c && typeof c.prices === "string" && c.prices) names.add(c.prices);
    }
    return names.size ? "priced by " + [...names].join(", ") : "";
  }

  // budgetText says which budget a budget.warning is about and how much of
  // it was spent: "run budget (caller) 3.30 of 4.00 USD", or "1555 of 1800
  // tokens" for a token budget.
  function budgetText(d) {
    const of = d.currency ? keelTranscript.formatNanos(d.spent) + " of " + keelTranscript.formatNanos(d.limit) + " " + d.currency :
      d.spent + " of " + d.limit + " tokens";
    return d.scope + " budget (" + d.set + ") " + of;
  }

  // The cache of rendered durable events, per tab.

  const cacheKey = (id) => "keel.log." + id;

  function loadCache(id) {
    try {
      const events = JSON.parse(sessionStorage.getItem(cacheKey(id)) || "[]");
      return Array.isArray(events) ? events : [];
    } catch {
      return [];
    }
  }

  function saveCache() {
    clearTimeout(page.saveTimer);
    page.saveTimer = 0;
    if (!page.session) return;
    try {
      sessionStorage.setItem(cacheKey(page.session), JSON.stringify(page.events));
    } catch {
      // Over the tab's quota: a reload reads the log from its start.
      sessionStorage.removeItem(cacheKey(page.session));
    }
  }

  function saveCacheSoon() {
    if (!page.saveTimer) page.saveTimer = setTimeout(saveCache, 200);
  }

  // The event stream.

  function stopStream() {
    clearTimeout(page.retryTimer);
    page.retryTimer = 0;
    if (page.stream) page.stream.abort();
    page.stream = null;
  }

  function setConn(state, text) {
    const c = $("conn");
    c.dataset.state = state;
    c.textContent = text || {live: "live", connecting: "connecting…", reconnecting: "reconnecting…",
      idle: "not connected", closed: "disconnected"}[state];
  }

  // startStream follows the session after the last durable event
  // rendered: ?after=N the first time, and Last-Event-ID, as a browser's
  // EventSource sends it, when it reconnects.
  function startStream(resume) {
    stopStream();
    const ctl = new AbortController();
    page.stream = ctl;
    page.streamError = null;
    setConn(resume ? "reconnecting" : "connecting");
    const url = sessionPath(page.session) + "/events?after=" + page.lastSeq;
    const h = headers({Accept: "text/event-stream"});
    if (resume) h["Last-Event-ID"] = String(page.lastSeq);
    readStream(url, h, ctl).then(() => null, (err) => err).then((err) => {
      if (page.stream !== ctl || ctl.signal.aborted) return;
      page.stream = null;
      streamEnded(err);
    });
  }

  async function readStream(url, h, ctl) {
    const resp = await fetch(url, {headers: h, signal: ctl.signal, cache: "no-store"});
    if (!resp.ok) throw await apiError(resp);
    setConn("live");
    if (page.failures > 0) showError(null); // what failed while the gateway was away
    page.failures = 0;
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = sseParser((ev) => {
      if (page.stream === ctl) handleEvent(ev);
    });
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      parser.push(value);
    }
  }

  // streamEnded reconnects, after a back-off, unless the stream cannot
  // succeed (no key, no session, a session that takes no more events).
  function streamEnded(err) {
    if (err && err.code === "cursor_ahead") {
      // The log this tab cached is not the session's any more (it was
      // recreated under the same ID): read it again from its start.
      resetLog();
      startStream(false);
      return;
    }
    const fatal = err && (err.status === 401 || err.status === 403 || err.status === 404 || err.status === 400);
    const done = page.streamError && page.streamError.code === "not_accepting";
    if (fatal || done) {
      setConn("closed");
      showError(err || page.streamError);
      return;
    }
    const delay = Math.min(500 * 2 ** page.failures, 10000);
    page.failures++;
    setConn("reconnecting");
    page.retryTimer = setTimeout(() => startStream(true), delay);
  }

  // sseParser splits a text/event-stream into events {id, event, data}.
  function sseParser(dispatch) {
    let buf = "";
    let ev = {id: "", event: "", data: []};
    return {
      push(chunk) {
        buf += chunk;
        for (;;) {
          const i = buf.search(/[\r\n]/);
          if (i < 0 || (buf[i] === "\r" && i + 1 === buf.length)) return; // a CR may be followed by LF
          const line = buf.slice(0, i);
          buf = buf.slice(i + (buf[i] === "\r" && buf[i + 1] === "\n" ? 2 : 1));
          if (line === "") {
            if (ev.data.length) dispatch({id: ev.id, event: ev.event || "message", data: ev.data.join("\n")});
            ev = {id: "", event: "", data: []};
            continue;
          }
          if (line[0] === ":") continue;
          const c = line.indexOf(":");
          const field = c < 0 ? line : line.slice(0, c);
          let value = c < 0 ? "" : line.slice(c + 1);
          if (value[0] === " ") value = value.slice(1);
          if (field === "id") ev.id = value;
          else if (field === "event") ev.event = value;
          else if (field === "data") ev.data.push(value);
        }
      },
    };
  }

  function handleEvent(ev) {
    let body;
    try {
      body = JSON.parse(ev.data);
    } catch {
      return;
    }
    if (ev.event === "lag") {
      append(el("div", {class: "note lag"}, "Missed " + body.missed + " live updates (the events below carry what they showed)."));
      return;
    }
    if (ev.event === "stream_error") {
      page.streamError = body;
      return;
    }
    if (ev.id) {
      renderDurable(body);
    } else {
      renderDelta(body);
    }
  }

  // Rendering.

  function append(node) {
    const log = $("log");
    const atEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    log.append(node);
    if (atEnd) log.scrollTop = log.scrollHeight;
  }

  // row is the element of one durable event.
  function row(env, cls, ...children) {
    return el("div", {class: "ev " + cls, "data-seq": env.seq, "data-type": env.type, "data-run": env.run_id}, ...children);
  }

  // inRun selects the elements of one run: tool call, request and
  // steering IDs are unique within a run only.
  const inRun = (runID, sel) => document.querySelector(sel + '[data-run="' + CSS.escape(runID) + '"]');
  const toolCard = (runID, id) => inRun(runID, '.tool-card[data-call="' + CSS.escape(id) + '"]');

  // inCard appends node to the card of a tool call, or to the log.
  function inCard(runID, callID, node) {
    const card = callID ? toolCard(runID, callID) : null;
    if (card) card.querySelector(".tool-events").append(node);
    else append(node);
    return card;
  }

  function liveNodes(run, step, attempt) {
    let sel = '.live[data-run="' + CSS.escape(run) + '"]';
    if (step !== undefined) sel += '[data-step="' + step + '"]';
    if (attempt !== undefined) sel += '[data-attempt="' + attempt + '"]';
    return [...document.querySelectorAll(sel)];
  }

  function dropLive(nodes) {
    for (const n of nodes) {
      page.live.delete(n.dataset.key);
      n.remove();
    }
  }

  function markRun(runID, outcome) {
    const start = document.querySelector('.run-start[data-run="' + CSS.escape(runID) + '"]');
    if (start) start.dataset.outcome = outcome;
  }

  function renderDurable(env) {
    const before = page.tr.last_seq;
    const ch = keelTranscript.apply(page.tr, env);
    if (page.tr.last_seq > before) {
      // Kept even when it shows nothing, so a reload reduces the same log.
      page.lastSeq = page.tr.last_seq;
      page.events.push(env);
      saveCacheSoon();
    }
    if (ch.ignored === "undecodable") {
      append(row(env, "dim", env.type + " (not understood)"));
      return;
    }
    if (ch.ignored) return; // a repeat, or an event of a run that ended
    const d = ch.event;
    switch (env.type) {
    case "run.started": {
      page.runUsage = null;
      const link = el("a", {class: "temporal-run", "data-workflow": env.session_id, target: "_blank", rel: "noopener", hidden: true},
        "Temporal ↗");
      const start = row(env, "run-start", el("div", {class: "meta"}, "Run " + d.number + (d.model ? " · " + d.model : "") + " ", link,
        isCount(d.number) ? pointActions(d.number, 0) : null),
      el("div", {class: "bubble user"}, d.prompt));
      if (isCount(d.number)) start.dataset.pointRun = d.number;
      append(start);
      attachmentsSoon();
      updateLinks();
      refreshStateSoon((st) => (st.active_run && st.active_run.run_id === env.run_id) || isEnded(env.run_id));
      break;
    }
    case "step.started": {
      const n = ch.run && ch.run.number;
      const step = row(env, "dim step", "step " + d.step, isCount(n) && n > 0 && d.step > 0 ? pointActions(n, d.step) : null);
      if (isCount(n) && n > 0) {
        step.dataset.pointRun = n;
        step.dataset.pointStep = d.step;
      }
      append(step);
      break;
    }
    case "session.forked": {
      const ok = typeof d.source === "string" && isCount(d.run);
      const node = row(env, "lineage-row", ok ? ["forked from ", sourceLabel(d.source), " after " + pointLabel(d.run, d.step)] :
        "forked (origin not understood)");
      // The messages the fork began with, which its log shows no prompt of.
      if (isCount(d.messages)) node.dataset.messages = d.messages;
      append(node);
      break;
    }
    case "session.rewound": {
      const ok = isCount(d.from_run) && isCount(d.to_run);
      append(row(env, "lineage-row rewound", ok ? "rewound from after run " + d.from_run + " to after " +
        pointLabel(d.to_run, d.to_step) + ": the runs after it left the model's history" : "rewound (point not understood)"));
      if (ok) markLeft(d.to_run, isCount(d.to_step) ? d.to_step : 0);
      break;
    }
    case "tool.proposed": {
      dropLive(liveNodes(env.run_id).filter((n) => n.classList.contains("live-tool")));
      const card = row(env, "tool-card", el("div", {class: "tool-head"}, el("span", {class: "tool-name"}, d.name),
        el("span", {class: "tool-state"}, "proposed")),
      el("pre", {class: "tool-args"}, JSON.stringify(d.arguments, null, 1)),
      el("div", {class: "tool-progress"}),
      el("div", {class: "tool-events"}));
      card.dataset.call = d.tool_call_id;
      card.dataset.status = "proposed";
      append(card);
      break;
    }
    case "tool.started":
    case "tool.detached": {
      const card = inCard(env.run_id, d.tool_call_id, row(env, "dim", env.type === "tool.started" ? "started" : "detached: the run goes on"));
      if (card) setToolState(card, env.type === "tool.started" ? "running" : "detached");
      break;
    }
    case "tool.finished": {
      const card = inCard(env.run_id, d.tool_call_id, row(env, "tool-result",
        el("div", {class: "meta"}, d.status + (d.duration ? " · " + d.duration : "") + (toolCard(env.run_id, d.tool_call_id) ? "" : " · " + d.name)),
        el("pre", {class: "tool-output"}, d.output || "")));
      if (card) {
        setToolState(card, d.status);
        card.querySelector(".tool-progress").textContent = "";
      }
      break;
    }
    case "agent.started": {
      // A child session (docs/contract.md §21.3): a card nested in the
      // delegating call's card, which its relayed text fills (§21.4).
      const card = row(env, "agent-card", el("div", {class: "agent-head"}, "agent " + d.agent + " (" + d.path + ") · session ",
        sessionLink(d.session_id), " ", el("span", {class: "agent-state"}, "running")),
      el("div", {class: "agent-text"}), el("div", {class: "agent-nested"}));
      card.dataset.path = d.path;
      card.dataset.status = "active";
      inCard(env.run_id, d.tool_call_id, card);
      break;
    }
    case "agent.finished": {
      const card = agentCard(env.run_id, d.path);
      const what = d.status + " in " + d.steps + (d.steps === 1 ? " step" : " steps") + ", " + tokens(d.usage || {}) +
        (d.error ? " · " + d.error.code + ": " + d.error.message : "");
      if (card) {
        card.dataset.status = d.status;
        card.querySelector(".agent-state").textContent = what;
        // The parent could not start the child: the ID is not its child's.
        const link = card.querySelector(".session-link");
        if (!d.session_id && link) link.replaceWith("none");
      }
      inCard(env.run_id, d.tool_call_id, row(env, "dim", "agent " + d.agent + " (" + d.path + ") " + what));
      break;
    }
    case "host_input.requested":
      inCard(env.run_id, d.tool_call_id, question(env));
      refreshStateSoon((st) => st.state === "waiting_for_host_input" || !isOpen(env.run_id, d.request_id));
      break;
    case "host_input.resolved": {
      const q = inRun(env.run_id, '.question[data-request="' + CSS.escape(d.request_id) + '"]');
      const node = row(env, "dim", d.interrupted ? "question closed: the call was interrupted" : "answered");
      if (q) {
        q.dataset.open = "false";
        for (const c of q.querySelectorAll("input, button, select, textarea")) c.disabled = true;
        q.append(node);
      } else {
        inCard(env.run_id, d.tool_call_id, node);
      }
      refreshStateSoon((st) => st.state !== "waiting_for_host_input" || !!document.querySelector('.question[data-open="true"]'));
      break;
    }
    case "steering.accepted": {
      const retract = el("button", {type: "button", class: "retract"}, "Retract");
      const node = row(env, "steering", el("span", {class: "meta"}, "steering "), el("span", {class: "bubble user"}, d.text), retract);
      node.dataset.steering = d.steering_id;
      node.dataset.status = "staged";
      retract.addEventListener("click", () => retractSteering(env.run_id, d.steering_id, node));
      append(node);
      break;
    }
    case "steering.applied":
    case "steering.retracted": {
      const status = env.type === "steering.applied" ? "applied" : "retracted";
      const s = inRun(env.run_id, '.steering[data-steering="' + CSS.escape(d.steering_id) + '"]');
      if (s) {
        s.dataset.status = status;
        const b = s.querySelector(".retract");
        if (b) b.remove();
      }
      append(row(env, "dim", "steering " + status));
      if (status === "applied") attachmentsSoon();
      break;
    }
    case "boundary_input.applied":
      // Input a hook brought (mail that arrived, a file that changed)
      // entered the conversation as internal context from its source,
      // not as a person's steering (docs/contract.md §23).
      append(row(env, "boundary-input", el("div", {class: "meta"}, "context from " + d.source + " · " + d.point),
        el("div", {class: "bubble context"}, d.text)));
      break;
    case "hook.decided": {
      // A hook denied a call or rewrote its arguments (on the call's
      // card), or stopped the run (the run.failed that follows ends it).
      const card = d.tool_call_id ? toolCard(env.run_id, d.tool_call_id) : null;
      const node = row(env, "hook-row", hookDecisionText(d, !!card),
        d.action === "replace" && d.arguments !== null ? el("pre", {class: "tool-args"}, JSON.stringify(d.arguments, null, 1)) : null);
      node.dataset.action = d.action;
      inCard(env.run_id, d.tool_call_id, node);
      break;
    }
    case "hook.failed": {
      const node = row(env, "hook-row", "hook " + d.hook + " failed at " + d.point + ": " + d.code + ": " + d.message +
        (d.continued ? "; the run goes on" : "; the run fails"));
      node.dataset.action = d.continued ? "continued" : "failed";
      inCard(env.run_id, d.tool_call_id, node);
      break;
    }
    case "usage.updated":
      page.runUsage = ch.run.usage;
      showUsage();
      append(Object.assign(row(env, "dim usage-row", "usage, step " + d.step + " attempt " + d.attempt + ": " + tokens(d.usage || {})),
        {title: pricesOf(d.usage)}));
      break;
    case "budget.warning":
      append(row(env, "budget-warning", "budget warning: " + budgetText(d)));
      break;
    case "model_call.completed": {
      const m = d.metrics || {};
      append(row(env, "dim", "model call: " + (m.model || "") + ", " + (m.duration || "") +
        (m.time_to_first_token ? ", first token after " + m.time_to_first_token : "") + ", " + (m.finish_reason || "")));
      break;
    }
    case "provider.stream_reset": {
      if (ch.abandoned) dropLive(liveNodes(env.run_id, d.step, ch.abandoned));
      const r = d.reason || {};
      append(row(env, "retry", "Attempt " + d.attempt + " of step " + d.step + " abandoned (" +
        [r.kind, r.failure, r.detail].filter(Boolean).join(": ") + "); its text was dropped."));
      break;
    }
    case "hosted_tool.activity":
      // A tool the model's backend ran itself (web search, code
      // execution, …): a small card in its step, marked when its attempt
      // is dropped (syncHosted). One of a step the page never saw names
      // the tool only.
      if (ch.hosted) append(hostedCard(env, ch.step, ch.hosted));
      else append(row(env, "dim", "hosted tool " + d.name));
      break;
    case "provider.request_retry":
      append(row(env, "retry", "Retrying in " + d.delay + " after " + d.kind + (d.status ? " " + d.status : "") +
        (d.message ? ": " + d.message : "")));
      break;
    case "compaction.started":
      append(row(env, "dim", "compacting the history (about " + d.estimated_context_tokens + " tokens)"));
      break;
    case "compaction.completed":
      append(row(env, "dim", "history compacted: " + d.messages_before + " → " + d.messages_after + " messages"));
      break;
    case "run.completed": {
      // The final text replaces what streamed of the last step.
      const step = keelTranscript.current(ch.run);
      const last = step ? step.number : undefined;
      dropLive(liveNodes(env.run_id).filter((n) => n.classList.contains("live-tool") ||
        (last !== undefined && n.dataset.step === String(last))));
      append(row(env, "run-end completed", d.text ? el("div", {class: "bubble assistant"}, d.text) : null,
        el("div", {class: "meta"}, "completed in " + d.steps + (d.steps === 1 ? " step" : " steps") +
          (d.usage ? ", " + tokens(d.usage) : ""))));
      endRun(env, "completed");
      break;
    }
    case "run.cancelled":
      for (const n of liveNodes(env.run_id)) n.classList.add("aborted");
      append(row(env, "run-end cancelled", "cancelled"));
      endRun(env, "cancelled");
      break;
    case "run.failed":
      for (const n of liveNodes(env.run_id)) n.classList.add("aborted");
      append(row(env, "run-end failed", "failed: " + d.code + ": " + d.message + (d.retryable ? " (retryable)" : "")));
      endRun(env, "failed");
      break;
    default:
      append(row(env, "dim", env.type));
    }
    syncHosted(ch);
    syncWaiting(ch);
  }

  // hostedCard is the card of a use of a hosted tool: "⌕ web_search
  // “query” → 3 results · what the backend said of it", the results'
  // URLs under it (folded when there are more than three), links only
  // for http and https. Everything in it is the backend's text, set as
  // text.
  function hostedCard(env, st, h) {
    const n = h.urls.length;
    const results = n ? " → " + n + (h.truncated ? "+" : "") + (n === 1 && !h.truncated ? " result" : " results") : null;
    const card = row(env, "hosted-card",
      el("div", {class: "hosted-head"}, "⌕ ", el("span", {class: "hosted-name"}, h.name || "hosted tool"),
        h.query ? [" ", el("q", {class: "hosted-query"}, h.query)] : null, results,
        h.detail ? el("span", {class: "meta"}, " · " + h.detail) : null),
      n ? el("details", {class: "hosted-urls", open: n <= 3}, el("summary", null, n === 1 ? "source" : "sources"),
        el("ul", null, h.urls.map((u) => el("li", null, urlNode(u))))) : null);
    card.dataset.step = st.number;
    card.dataset.attempt = h.attempt;
    return card;
  }

  // hookDecisionText says what a hook decided: "hook guard denied the
  // call: reason" on the call's card, naming the call's ID elsewhere.
  function hookDecisionText(d, onCard) {
    const call = onCard ? "the call" : "call " + d.tool_call_id;
    const why = d.reason ? ": " + d.reason : "";
    switch (d.action) {
    case "deny": return "hook " + d.hook + " denied " + call + why;
    case "replace": return "hook " + d.hook + " replaced the arguments of " + call + why;
    case "stop": return "hook " + d.hook + " stopped the run at " + d.point + why;
    default: return "hook " + d.hook + " decided " + d.action + " at " + d.point + why;
    }
  }

  // urlNode is a result's URL: a link that opens apart from the page for
  // http and https, plain text for anything else.
  function urlNode(u) {
    let web = false;
    try {
      web = ["http:", "https:"].includes(new URL(u).protocol);
    } catch {
      web = false;
    }
    return web ? el("a", {href: u, target: "_blank", rel: "noopener noreferrer"}, u) : u;
  }

  // syncHosted marks the cards of hosted tools' uses the reducer dropped
  // with their attempt (a reset, or a later attempt's output), as the
  // attempt's streamed text is dropped; what they cost stays counted.
  function syncHosted(ch) {
    if (!ch.run || !ch.step || !ch.discarded) return;
    const sel = '.hosted-card[data-run="' + CSS.escape(ch.run.id) + '"][data-step="' + ch.step.number + '"]';
    for (const n of document.querySelectorAll(sel)) {
      if (Number(n.dataset.attempt) < ch.step.attempt) n.classList.add("abandoned");
    }
  }

  // waitText says how long a wait is: "350 ms", "4.2 s", "1 min 30 s".
  function waitText(ms) {
    if (ms < 1000) return ms + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    const s = Math.round(ms / 1000);
    return Math.floor(s / 60) + " min" + (s % 60 ? " " + (s % 60) + " s" : "");
  }

  // syncWaiting removes the wait notices (model.waiting) of a run's steps
  // that the reducer says no longer wait: the attempt streamed, answered,
  // was reset, or the run ended (docs/contract.md §20.5).
  function syncWaiting(ch) {
    if (!ch.run) return;
    for (const n of document.querySelectorAll('.live-wait[data-run="' + CSS.escape(ch.run.id) + '"]')) {
      const st = ch.run.steps.find((x) => String(x.number) === n.dataset.step);
      if (!st || !st.waiting || String(st.attempt) !== n.dataset.attempt) dropLive([n]);
    }
  }

  function endRun(env, outcome) {
    markRun(env.run_id, outcome);
    enablePoints(env.run_id);
    for (const n of liveNodes(env.run_id)) page.live.delete(n.dataset.key);
    refreshStateSoon((st) => !st.active_run || st.active_run.run_id !== env.run_id);
  }

  const isEnded = (runID) => !!document.querySelector('.run-start[data-outcome][data-run="' + CSS.escape(runID) + '"]');

  function setToolState(card, s) {
    card.dataset.status = s;
    card.querySelector(".tool-state").textContent = s;
  }

  // agentCard is the card of a run's child at path.
  const agentCard = (runID, path) => inRun(runID, '.agent-card[data-path="' + CSS.escape(path) + '"]');

  // renderRelayed shows a child's relayed text in its card, or in a
  // nested card for a grandchild: the text the reducer keeps for it.
  function renderRelayed(env, ch) {
    if (!ch.agent) return;
    const top = env.path.split("/")[0];
    const card = agentCard(env.run_id, top);
    if (!card) return;
    let target = card.querySelector(".agent-text");
    if (ch.agent.path !== top) {
      let sub = [...card.querySelectorAll(".agent-sub")].find((n) => n.dataset.path === ch.agent.path);
      if (!sub) {
        sub = el("div", {class: "agent-sub"}, el("div", {class: "meta"}, ch.agent.path), el("div", {class: "agent-text"}));
        sub.dataset.path = ch.agent.path;
        card.querySelector(".agent-nested").append(sub);
      }
      target = sub.querySelector(".agent-text");
    }
    target.textContent = ch.agent.text;
  }

  function renderDelta(env) {
    const ch = keelTranscript.apply(page.tr, env);
    if (ch.ignored) return; // not the live attempt's, or after its response
    if (typeof env.path === "string" && env.path !== "") {
      renderRelayed(env, ch);
      return;
    }
    const d = ch.event;
    // A later attempt without a reset before it: the earlier one's output
    // is gone all the same.
    if (ch.abandoned) dropLive(liveNodes(env.run_id, d.step, ch.abandoned));
    syncHosted(ch);
    switch (env.type) {
    case "text.delta":
    case "reasoning.delta":
    case "tool_call.delta": {
      const kind = {"text.delta": "live-text", "reasoning.delta": "live-reasoning", "tool_call.delta": "live-tool"}[env.type];
      const key = [env.run_id, d.step, d.attempt, kind, d.index || 0].join("|");
      let node = page.live.get(key);
      if (!node) {
        node = el("div", {class: "live " + kind, "data-run": env.run_id, "data-step": d.step, "data-attempt": d.attempt, "data-key": key});
        if (kind === "live-tool") node.append(el("span", {class: "meta"}, "calling "), el("span", {class: "tool-name"}), el("code"));
        page.live.set(key, node);
        append(node);
      }
      if (kind === "live-tool") {
        if (d.name) node.querySelector(".tool-name").textContent = d.name + " ";
        if (d.arguments) node.querySelector("code").append(d.arguments);
      } else {
        node.append(ch.text);
      }
      const log = $("log");
      if (log.scrollHeight - log.scrollTop - log.clientHeight < 80) log.scrollTop = log.scrollHeight;
      break;
    }
    case "tool.progress": {
      const card = toolCard(env.run_id, d.tool_call_id);
      if (card) card.querySelector(".tool-progress").textContent = ch.tool.progress;
      break;
    }
    case "model.waiting": {
      // The step waits for its turn under a rate limit; the notice goes
      // once it no longer does (syncWaiting).
      const st = ch.step;
      const key = [env.run_id, st.number, st.attempt, "live-wait"].join("|");
      let node = page.live.get(key);
      if (!node) {
        node = el("div", {class: "live live-wait", "data-run": env.run_id, "data-step": st.number, "data-attempt": st.attempt, "data-key": key});
        page.live.set(key, node);
        append(node);
      }
      node.textContent = "waiting " + waitText(st.waiting.wait_ms) + " for rate limit " + st.waiting.limit;
      node.title = "sent at about " + new Date(Date.now() + st.waiting.wait_ms).toLocaleTimeString();
      break;
    }
    }
    syncWaiting(ch);
  }

  // question renders a host-input request with a form for its answer,
  // shaped by the request's schema: approve or deny an approval, yes or
  // no, a choice, a number, text, or JSON.
  function question(env) {
    const d = env.data || {};
    const schema = d.schema || null;
    const form = el("form", {class: "answer-form"});
    const status = el("span", {class: "answer-status"});
    const submit = (answer) => respond(env.run_id, d.request_id, answer, form, status);
    const props = schema && schema.properties;
    if (props && props.approved) {
      const reason = el("input", {class: "answer-reason", placeholder: "reason (optional)"});
      const yes = el("button", {type: "button", class: "answer-yes"}, "Approve");
      const no = el("button", {type: "button", class: "answer-no danger"}, "Deny");
      const approval = (ok) => {
        const a = {approved: ok};
        if (reason.value.trim()) a.reason = reason.value.trim();
        submit(a);
      };
      yes.addEventListener("click", () => approval(true));
      no.addEventListener("click", () => approval(false));
      form.append(yes, no, reason);
    } else if (schema && schema.type === "boolean") {
      const yes = el("button", {type: "button", class: "answer-yes"}, "Yes");
      const no = el("button", {type: "button", class: "answer-no"}, "No");
      yes.addEventListener("click", () => submit(true));
      no.addEventListener("click", () => submit(false));
      form.append(yes, no);
    } else {
      const kind = !schema || schema.type === "string" ? "text" : schema.type === "number" || schema.type === "integer" ? "number" : "json";
      let input;
      if (schema && Array.isArray(schema.enum)) {
        input = el("select", {class: "answer-input"}, schema.enum.map((v) => el("option", {value: JSON.stringify(v)}, String(v))));
      } else if (kind === "json") {
        input = el("textarea", {class: "answer-input", rows: 3, placeholder: "JSON answer"});
      } else {
        input = el("input", {class: "answer-input", type: kind === "number" ? "number" : "text", placeholder: "your answer"});
      }
      form.append(input, el("button", {type: "submit", class: "answer-send"}, "Answer"));
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        let answer = input.value;
        try {
          if (input.tagName === "SELECT" || kind === "json") answer = JSON.parse(answer);
          else if (kind === "number") answer = Number(answer);
        } catch (err) {
          status.textContent = "not JSON: " + err.message;
          return;
        }
        submit(answer);
      });
    }
    form.append(status);
    const node = row(env, "question", el("p", {class: "question-prompt"}, d.prompt || "The run asks:"), form);
    node.dataset.request = d.request_id;
    node.dataset.open = "true";
    return node;
  }

  // runQuery addresses a command to one run (?run=N; run IDs end in
  // "/run-N"), not to whichever run is active when it arrives.
  function runQuery(runID) {
    const m = /\/run-(\d+)$/.exec(runID || "");
    return m ? "?run=" + m[1] : "";
  }

  async function respond(runID, requestID, answer, form, status) {
    status.textContent = "sending…";
    try {
      await call("POST", sessionPath(page.session) + "/respond" + runQuery(runID), {request_id: requestID, answer});
      status.textContent = "sent";
      for (const c of form.querySelectorAll("input, button, select, textarea")) c.disabled = true;
    } catch (err) {
      status.textContent = err.message;
    }
  }

  async function retractSteering(runID, id, node) {
    try {
      const r = await call("DELETE", sessionPath(page.session) + "/steer/" + encodeURIComponent(id) + runQuery(runID));
      if (r.result !== "retracted") node.querySelector(".meta").textContent = "steering (" + r.result.replaceAll("_", " ") + ") ";
    } catch (err) {
      showError(err);
    }
  }

  // Attachments (images, PDFs). The composer uploads the files chosen
  // (POST /v1/attachments, the file as its own media type) and sends their
  // references with the next prompt or steering, showing them as chips
  // until then. The log shows a message's attachments as chips too: the
  // events do not carry them, the session's history does, so it is read
  // when the log shows a new prompt or applied steering.
  const attachmentTypes = ["image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"];
  const maxAttachments = 8;
  const maxAttachmentName = 256;
  const pending = []; // the references the next prompt carries
  let uploading = 0;
  let attachTimer = 0;

  // sizeText says a size in bytes as keel's CLI does: 70 B, 12 KB, 3.4 MB.
  function sizeText(n) {
    if (!Number.isFinite(n) || n < 0) return "";
    if (n < 1024) return n + " B";
    if (n < 1024 * 1024) return Math.round(n / 1024) + " KB";
    return String(Math.round(n / (1024 * 1024) * 10) / 10) + " MB";
  }

  // attachmentChip is an attachment as a small labelled chip: its kind,
  // its name (or media type) and its size; never its bytes.
  function attachmentChip(a, ...extra) {
    const kind = a && a.kind === "document" ? "PDF" : "image";
    const name = a && typeof a.name === "string" && a.name ? a.name : String(a && a.media_type || "attachment");
    return el("span", {class: "chip attachment", "data-kind": a && a.kind, "data-key": a && a.key,
      title: [a && a.media_type, a && a.key].filter(Boolean).join(" · ")},
    el("span", {class: "chip-kind"}, kind), el("span", {class: "chip-name"}, name),
    el("span", {class: "chip-size"}, sizeText(a && a.bytes)), ...extra);
  }

  function showPending() {
    const box = $("pending");
    box.replaceChildren(...pending.map((a, i) => {
      const remove = el("button", {type: "button", title: "Remove", "aria-label": "Remove " + (a.name || "attachment")}, "×");
      remove.addEventListener("click", () => {
        pending.splice(i, 1);
        showPending();
      });
      return attachmentChip(a, remove);
    }));
    if (uploading) box.dataset.busy = "true";
    else delete box.dataset.busy;
    box.hidden = !pending.length && !uploading;
    $("send").disabled = $("steer").disabled = uploading > 0;
  }

  // uploadName is a file's name as an upload takes it: printable, at most
  // maxAttachmentName bytes.
  function uploadName(name) {
    let s = String(name || "").replace(/[\x00-\x1f\x7f]/g, "?");
    const enc = new TextEncoder();
    while (enc.encode(s).length > maxAttachmentName) s = Array.from(s).slice(0, -1).join("");
    return s;
  }

  async function uploadFiles(files) {
    showError(null);
    for (const f of files) {
      if (!attachmentTypes.includes(f.type)) {
        showError({code: "unsupported_media_type", message: f.name + ": keel attaches PNG, JPEG, GIF and WebP images and PDFs"});
        continue;
      }
      if (pending.length + uploading >= maxAttachments) {
        showError({code: "too_many", message: "a prompt carries at most " + maxAttachments + " attachments"});
        break;
      }
      uploading++;
      showPending();
      try {
        const name = uploadName(f.name);
        const resp = await fetch("/v1/attachments" + (name ? "?name=" + encodeURIComponent(name) : ""),
          {method: "POST", headers: headers({"Content-Type": f.type}), body: f});
        if (!resp.ok) throw await apiError(resp);
        pending.push(await resp.json());
      } catch (err) {
        showError(err);
      } finally {
        uploading--;
        showPending();
      }
    }
  }

  // withPending adds the pending attachments to body.
  function withPending(body) {
    if (pending.length) body.attachments = pending.slice();
    return body;
  }

  function clearPending() {
    pending.length = 0;
    showPending();
  }

  function attachmentsSoon() {
    clearTimeout(attachTimer);
    const id = page.session;
    attachTimer = setTimeout(() => loadAttachments(id), 200);
  }

  // loadAttachments reads the session's history and puts the attachments
  // of its user messages on the prompts and steering of the log.
  async function loadAttachments(id) {
    if (!id || id !== page.session) return;
    const messages = [];
    try {
      for (let offset = 0; offset < 5000;) {
        const h = await call("GET", sessionPath(id) + "/history?offset=" + offset + "&limit=200");
        const got = Array.isArray(h && h.messages) ? h.messages : [];
        messages.push(...got);
        offset += got.length;
        if (!got.length || offset >= h.total) break;
      }
    } catch {
      return; // the chips are extra: the log stands without them
    }
    if (id !== page.session) return;
    // A fork's history begins with the messages it was forked with; the
    // runs a rewind left are not in the history.
    const forked = $("log").querySelector('.lineage-row[data-type="session.forked"][data-messages]');
    placeAttachments(messages.slice(forked ? Number(forked.dataset.messages) : 0),
      [...$("log").querySelectorAll(".run-start:not([data-left]), .steering")]);
  }

  // placeAttachments matches the history's user messages to the log's
  // prompts and steering, in order: steering by its ID, a prompt by its
  // text. Messages the log does not show (a compacted summary) and rows
  // the history no longer holds (runs a rewind left) are passed over.
  function placeAttachments(messages, rows) {
    let i = 0;
    for (const m of messages) {
      if (!m || m.role !== "user") continue;
      let j = i;
      for (; j < rows.length; j++) {
        const r = rows[j];
        const steering = r.classList.contains("steering");
        if (m.steering_id ? steering && r.dataset.steering === m.steering_id
          : !steering && (r.querySelector(".bubble.user") || {}).textContent === (m.content || "")) break;
      }
      if (j === rows.length) continue;
      const atts = Array.isArray(m.attachments) ? m.attachments : [];
      const old = rows[j].querySelector(":scope > .attachments");
      if (old) old.remove();
      if (atts.length) rows[j].append(el("div", {class: "attachments"}, atts.map((a) => attachmentChip(a))));
      i = j + 1;
    }
  }

  // The composer.

  async function send(e) {
    e.preventDefault();
    const text = $("prompt").value;
    if (!text.trim() || !page.session || uploading) return;
    const body = withPending({prompt: text});
    const model = $("model").value.trim();
    if (model) body.model = model;
    const tools = $("tools").value.split(",").map((t) => t.trim()).filter(Boolean);
    if (tools.length) body.tools = tools;
    showError(null);
    try {
      await call("POST", sessionPath(page.session) + "/runs", body);
      $("prompt").value = "";
      clearPending();
      if (!page.stream) {
        page.failures = 0;
        startStream(false); // a new session's stream, or one waiting to reconnect
      }
      loadSessions();
    } catch (err) {
      showError(err);
    }
  }

  async function steer() {
    const text = $("prompt").value;
    if (!text.trim() || !page.session || uploading) return;
    showError(null);
    try {
      await call("POST", sessionPath(page.session) + "/steer", withPending({text}));
      $("prompt").value = "";
      clearPending();
    } catch (err) {
      showError(err);
    }
  }

  async function cancelRun() {
    if (!page.session) return;
    showError(null);
    try {
      await call("POST", sessionPath(page.session) + "/cancel");
    } catch (err) {
      showError(err);
    }
  }

  // hideSession leaves the open session (its stream stops) and hides it,
  // for the schedules view to take its place.
  function hideSession() {
    stopStream();
    saveCache();
    clearTimeout(page.stateTimer);
    page.session = null;
    $("session").hidden = true;
    $("empty").hidden = true;
    for (const li of document.querySelectorAll("#sessions li")) li.classList.remove("current");
    if (location.hash.startsWith("#session=")) history.replaceState(null, "", location.pathname + location.search);
  }

  // What schedules.js and evals.js use of this page.
  window.keelApp = Object.freeze({
    call, el, openSession, hideSession, viewOpened,
    onSessionOpen: (fn) => { sessionHooks.push(fn); },
    onViewOpen: (fn) => { viewHooks.push(fn); },
    onKeyChange: (fn) => { keyHooks.push(fn); },
  });

  // Start.

  const keyInput = $("api-key");
  keyInput.value = apiKey();
  keyInput.addEventListener("change", () => {
    if (keyInput.value.trim()) sessionStorage.setItem(keyName, keyInput.value.trim());
    else sessionStorage.removeItem(keyName);
    loadSessions();
    for (const h of keyHooks) h();
    if (page.session) openSession(page.session);
  });
  $("open-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const id = $("open-id").value.trim();
    if (id) openSession(id);
    $("open-id").value = "";
  });
  $("refresh").addEventListener("click", loadSessions);
  $("composer").addEventListener("submit", send);
  $("steer").addEventListener("click", steer);
  $("attach-button").addEventListener("click", () => $("attach").click());
  $("attach").addEventListener("change", (e) => {
    const files = [...e.target.files];
    e.target.value = ""; // the same file may be chosen again
    uploadFiles(files);
  });
  $("cancel").addEventListener("click", cancelRun);
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("composer").requestSubmit();
  });
  window.addEventListener("pagehide", saveCache);
  window.addEventListener("online", () => {
    if (page.retryTimer) startStream(true);
  });
  window.addEventListener("hashchange", () => {
    const id = decodeURIComponent(location.hash.replace(/^#session=/, ""));
    if (location.hash.startsWith("#session=") && id && id !== page.session) openSession(id);
  });
  loadSessions();
  const fromHash = decodeURIComponent(location.hash.replace(/^#session=/, ""));
  if (location.hash.startsWith("#session=") && fromHash) openSession(fromHash);
})();
