// keel's web page: the schedules view (docs/gateway.md, "Web page";
// docs/contract.md §22). It lists the schedules, shows one (when it fires,
// what it sends where, its latest firings with links to the sessions they
// made), pauses, unpauses, triggers and deletes it, and creates new ones,
// all through the gateway's /v1/schedules routes, with app.js's calls
// (window.keelApp). What a schedule holds is shown as text, never HTML.
"use strict";

(() => {
  const app = window.keelApp;
  const $ = (id) => document.getElementById(id);
  const el = app.el;
  const schedulePath = (id) => "/v1/schedules/" + encodeURIComponent(id);

  // view is what the schedules view shows.
  const view = {id: null, timer: 0};

  function showError(err) {
    const p = $("schedule-error");
    p.textContent = err ? (err.code ? err.code + ": " : "") + err.message : "";
    p.hidden = !err;
  }

  async function loadSchedules() {
    const box = $("schedules-error");
    try {
      const data = await app.call("GET", "/v1/schedules?limit=100");
      const items = data.schedules.map((s) => {
        const open = el("button", {type: "button", class: "open-schedule"}, el("span", {class: "sid"}, s.id),
          el("span", {class: "status", "data-paused": s.paused ? "true" : "false"}, s.paused ? "paused" : "active"));
        open.addEventListener("click", () => openSchedule(s.id));
        return el("li", {"data-schedule": s.id, class: s.id === view.id ? "current" : null}, open);
      });
      $("schedules").replaceChildren(...items);
      box.hidden = true;
    } catch (err) {
      box.textContent = err.message;
      box.hidden = false;
    }
  }

  // openSchedule shows a schedule in place of the session.
  function openSchedule(id) {
    view.id = id;
    app.hideSession();
    app.viewOpened("schedule");
    $("schedule").hidden = false;
    $("schedule-new").hidden = true;
    $("schedule-id").textContent = id;
    showError(null);
    for (const li of document.querySelectorAll("#schedules li")) {
      li.classList.toggle("current", li.dataset.schedule === id);
    }
    refresh();
  }

  // closeSchedule hides the view (a session is opened instead).
  function closeSchedule() {
    view.id = null;
    clearTimeout(view.timer);
    $("schedule").hidden = true;
    for (const li of document.querySelectorAll("#schedules li")) li.classList.remove("current");
  }

  // refresh reads the open schedule and draws it; while it is shown it
  // reads it again every few seconds, so new firings appear.
  async function refresh() {
    clearTimeout(view.timer);
    const id = view.id;
    if (!id) return;
    try {
      const st = await app.call("GET", schedulePath(id));
      if (view.id !== id) return;
      draw(st);
    } catch (err) {
      if (view.id !== id) return;
      showError(err);
    }
    view.timer = setTimeout(refresh, 3000);
  }

  function fmt(t) { return t ? new Date(t).toISOString().replace(".000Z", "Z") : ""; }

  function specText(s) {
    const parts = [];
    if (s.cron) parts.push("cron " + s.cron + (s.timezone ? " in " + s.timezone : ""));
    if (s.every) parts.push("every " + s.every);
    let text = parts.join(" and ");
    if (s.jitter) text += ", jitter up to " + s.jitter;
    return text;
  }

  // sessionLink opens a session the schedule sends to.
  function sessionLink(id) {
    const a = el("a", {href: "#session=" + encodeURIComponent(id), class: "session-link"}, id);
    a.addEventListener("click", (e) => {
      e.preventDefault();
      closeSchedule();
      app.openSession(id);
    });
    return a;
  }

  function draw(st) {
    const s = st.schedule;
    const badge = $("schedule-state");
    badge.textContent = st.paused ? (st.paused_by_failure ? "paused by a failure" : "paused") : "active";
    badge.dataset.state = st.paused ? "paused" : "active";
    $("schedule-pause").hidden = st.paused;
    $("schedule-unpause").hidden = !st.paused;
    const rows = [
      ["fires", specText(s)],
      ["prompt", s.prompt],
      ["session", s.new_session ? "a new one each firing (" + s.id + "-…)" : sessionLink(s.session || s.id)],
    ];
    if (!s.new_session) rows.push(["overlap", s.overlap || "skip"]);
    if (s.config && s.config.agent) rows.push(["agent", s.config.agent]);
    if (s.config && s.config.model) rows.push(["model", s.config.model]);
    if (s.config && s.config.tools) rows.push(["tools", s.config.tools.join(", ") || "none"]);
    rows.push(["policy", (s.pause_on_failure ? "pause on failure; " : "") + "catch-up window " + (s.catchup_window || "10m0s")]);
    if (st.note) rows.push(["note", st.note]);
    if (st.failure) rows.push(["failure", st.failure.code + ": " + st.failure.message]);
    rows.push(["next", st.next.length ? st.next.slice(0, 3).map(fmt).join(", ") : "none"]);
    rows.push(["fired", String(st.fired) + (st.missed ? " (" + st.missed + " missed)" : "")]);
    $("schedule-details").replaceChildren(...rows.map(([k, v]) =>
      el("div", {class: "row", "data-field": k}, el("dt", {}, k), el("dd", {}, v))));
    const firings = st.recent.slice().reverse().map((f) => {
      const r = f.result || {};
      const what = [];
      // A refused firing made no session.
      if (r.session && f.status !== "refused") what.push(sessionLink(r.session));
      if (r.run_id) what.push(" " + r.run_id.replace(/^.*\//, ""));
      if (r.skipped) what.push(" (a run was active)");
      if (r.steering_id) what.push(" steered");
      if (r.queued && !f.run) what.push(" queued");
      if (f.run) what.push(" · " + f.run);
      if (f.error) what.push(" " + f.error.code + ": " + f.error.message);
      return el("li", {class: "firing", "data-status": f.status, "data-run": f.run || null, "data-session": r.session || null},
        el("span", {class: "dim"}, fmt(f.scheduled_at)), " ", el("span", {class: "badge", "data-state": f.status}, f.status), " ", ...what);
    });
    $("schedule-firings").replaceChildren(...firings);
    $("schedule-firings-none").hidden = firings.length > 0;
  }

  async function act(verb) {
    const id = view.id;
    if (!id) return;
    showError(null);
    try {
      if (verb === "delete") {
        if (!window.confirm("Delete schedule " + id + "? The sessions it made stay.")) return;
        await app.call("DELETE", schedulePath(id));
        closeSchedule();
        $("empty").hidden = false;
        loadSchedules();
        return;
      }
      await app.call("POST", schedulePath(id) + "/" + verb);
      loadSchedules();
      refresh();
    } catch (err) {
      showError(err);
    }
  }

  // The create form.

  function openNew() {
    closeSchedule();
    app.hideSession();
    app.viewOpened("schedule");
    $("schedule-new").hidden = false;
    $("schedule-form-error").hidden = true;
  }

  async function create(e) {
    e.preventDefault();
    const f = (name) => $("new-" + name).value.trim();
    const body = {id: f("id"), prompt: $("new-prompt").value};
    for (const k of ["cron", "every", "timezone"]) if (f(k)) body[k] = f(k);
    if ($("new-new-session").checked) body.new_session = true;
    else if (f("session")) body.session = f("session");
    if (!body.new_session && f("overlap") !== "skip") body.overlap = f("overlap");
    if ($("new-pause-on-failure").checked) body.pause_on_failure = true;
    const config = {};
    if (f("agent")) config.agent = f("agent");
    if (f("model")) config.model = f("model");
    if (f("tools")) config.tools = f("tools").split(",").map((t) => t.trim()).filter(Boolean);
    if (Object.keys(config).length) body.config = config;
    const box = $("schedule-form-error");
    try {
      await app.call("POST", "/v1/schedules", body);
      box.hidden = true;
      $("schedule-form").reset();
      await loadSchedules();
      openSchedule(body.id);
    } catch (err) {
      box.textContent = (err.code ? err.code + ": " : "") + err.message;
      box.hidden = false;
    }
  }

  $("schedules-refresh").addEventListener("click", loadSchedules);
  $("schedule-add").addEventListener("click", openNew);
  $("schedule-form").addEventListener("submit", create);
  $("schedule-pause").addEventListener("click", () => act("pause"));
  $("schedule-unpause").addEventListener("click", () => act("unpause"));
  $("schedule-trigger").addEventListener("click", () => act("trigger"));
  $("schedule-delete").addEventListener("click", () => act("delete"));
  app.onSessionOpen(closeSchedule);
  app.onViewOpen((name) => {
    if (name === "schedule") return;
    closeSchedule();
    $("schedule-new").hidden = true;
  });
  app.onKeyChange(loadSchedules);
  loadSchedules();
})();
