// keel's web page: the eval view (docs/evals.md, "On the page";
// docs/contract.md §24). It opens an eval by ID (the nav's field, or
// #eval=ID), shows its progress while it runs, reading GET /v1/evals/{id}
// every second, cancels it (confirmed), and once it ends shows its
// report: the totals of each side, a histogram of their scores, and the
// cases, regressions first, each with its scores, reasons, answers and
// their diff. What the report holds is shown as text, never HTML.
"use strict";

(() => {
  const app = window.keelApp;
  const $ = (id) => document.getElementById(id);
  const el = app.el;
  const evalPath = (id) => "/v1/evals/" + encodeURIComponent(id);
  const hashPrefix = "#eval=";

  // view is what the eval view shows; gen counts its reads, so that only
  // the latest one draws or reads again.
  const view = {id: null, timer: 0, gen: 0};

  function showError(err) {
    const p = $("eval-error");
    p.textContent = err ? (err.code ? err.code + ": " : "") + err.message : "";
    p.hidden = !err;
  }

  function openEval(id) {
    app.hideSession();
    app.viewOpened("eval");
    clearTimeout(view.timer);
    view.id = id;
    if (location.hash !== hashPrefix + encodeURIComponent(id)) {
      history.replaceState(null, "", hashPrefix + encodeURIComponent(id));
    }
    $("eval").hidden = false;
    $("eval-id").textContent = id;
    $("eval-state").textContent = "";
    delete $("eval-state").dataset.state;
    $("eval-counts").replaceChildren();
    $("eval-bar").max = 1;
    $("eval-bar").value = 0;
    $("eval-cancel").hidden = true;
    $("eval-report").hidden = true;
    showError(null);
    refresh();
  }

  // closeEval hides the view and stops its polling.
  function closeEval() {
    if (!view.id) return;
    view.id = null;
    view.gen++;
    clearTimeout(view.timer);
    $("eval").hidden = true;
    if (location.hash.startsWith(hashPrefix)) history.replaceState(null, "", location.pathname + location.search);
  }

  // refresh reads the eval's status and draws it; while it runs it reads
  // it again each second, and once it ended reads its report.
  async function refresh() {
    clearTimeout(view.timer);
    const id = view.id, gen = ++view.gen;
    if (!id) return;
    let st;
    try {
      st = await app.call("GET", evalPath(id));
    } catch (err) {
      if (view.gen !== gen) return;
      showError(err);
      if (err.status !== 404 && err.status !== 400) view.timer = setTimeout(refresh, 3000);
      return;
    }
    if (view.gen !== gen) return;
    showError(null);
    drawStatus(st);
    if (st.state === "running") {
      view.timer = setTimeout(refresh, 1000);
      return;
    }
    try {
      const rep = await app.call("GET", evalPath(id) + "/report");
      if (view.gen === gen) drawReport(rep);
    } catch (err) {
      if (view.gen !== gen) return;
      showError(err);
      if (err.status !== 404 && err.status !== 400) view.timer = setTimeout(refresh, 3000);
    }
  }

  function drawStatus(st) {
    const badge = $("eval-state");
    badge.textContent = st.state;
    badge.dataset.state = st.state;
    $("eval-cancel").hidden = st.state !== "running";
    const bar = $("eval-bar");
    bar.max = Math.max(st.total, 1);
    bar.value = st.done;
    const counts = [
      ["done", st.done + " of " + st.total + " cases done"],
      ["running", st.running + " running"],
      ["passed", st.passed + " passed"],
      ["failed", st.failed + " failed"],
      ["usage", usageText(st.usage)],
    ];
    const parts = counts.map(([k, v]) => el("span", {"data-field": k, "data-value": typeof st[k] === "number" ? st[k] : null}, v));
    if (st.error) parts.push(el("span", {class: "error", "data-field": "error"}, st.error.code + ": " + st.error.message));
    $("eval-counts").replaceChildren(...parts);
  }

  // usageText is tokens and cost in a few words.
  function usageText(u) {
    if (!u) return "";
    return ((u.input_tokens || 0) + (u.output_tokens || 0)) + " tokens" + (costText(u) ? " · " + costText(u) : "");
  }

  // costText is "0.0123 USD" (one part per currency, "≥" when some
  // requests had no price), or "" when none had one.
  function costText(u) {
    const list = u && Array.isArray(u.cost) ? u.cost.filter((c) => c && typeof c.currency === "string") : [];
    if (!list.length) return "";
    return (u.unpriced > 0 ? "≥ " : "") + list.map((c) => keelTranscript.formatNanos(c.nanos) + " " + c.currency).join(" + ");
  }

  // durationText rounds a Go duration ("1.234567s") to milliseconds.
  function durationText(d) {
    const units = {h: 3600e3, m: 60e3, s: 1e3, ms: 1, "µs": 1e-3, us: 1e-3, ns: 1e-6};
    let ms = 0;
    for (const [, n, unit] of String(d || "").matchAll(/([0-9.]+)(h|ms|m|s|µs|us|ns)/g)) ms += Number(n) * units[unit];
    return ms >= 1000 ? (ms / 1000).toFixed(2) + "s" : Math.round(ms) + "ms";
  }

  const pct = (x) => (100 * (x || 0)).toFixed(1) + "%";

  // The rows of the totals: a name, a field and a side's value.
  const totalRows = [
    ["cases", "cases", (t) => String(t.cases)],
    ["pass rate", "pass_rate", (t) => pct(t.pass_rate) + " (" + t.passed + "/" + (t.cases - t.skipped) + ")"],
    ["passed", "passed", (t) => String(t.passed)],
    ["failed / errors / skipped", "failed", (t) => t.failed + " / " + t.errors + " / " + t.skipped],
    ["mean score", "mean_score", (t) => (t.mean_score || 0).toFixed(3)],
    ["tokens in / out", "tokens", (t) => t.usage.input_tokens + " / " + t.usage.output_tokens],
    ["cost", "cost", (t) => costText(t.usage) || "none priced"],
    ["judge tokens", "judge_tokens", (t) => String((t.judge_usage.input_tokens || 0) + (t.judge_usage.output_tokens || 0))],
    ["judge cost", "judge_cost", (t) => costText(t.judge_usage) || "none priced"],
    ["duration p50 / p99", "duration", (t) => durationText(t.duration_p50) + " / " + durationText(t.duration_p99)],
  ];

  function drawReport(rep) {
    const sides = [["candidate", rep.candidate]];
    if (rep.baseline) sides.push(["baseline", rep.baseline]);
    const notes = [];
    if (rep.baseline) notes.push(rep.regressions + " regressed · " + rep.improvements + " improved");
    if (rep.budget_spent) notes.push("the eval's budget was spent: the cases left did not run");
    if (rep.cancelled) notes.push("the eval was cancelled: the cases left did not run");
    $("eval-notes").textContent = notes.join(" · ");
    const head = el("tr", {}, el("th", {}, ""), sides.map(([name]) => el("th", {scope: "col"}, name)));
    const rows = totalRows.map(([label, field, f]) => el("tr", {"data-field": field},
      el("th", {scope: "row"}, label), sides.map(([name, t]) => el("td", {"data-side": name}, f(t)))));
    $("eval-totals").replaceChildren(el("thead", {}, head), el("tbody", {}, rows));
    $("eval-chart").replaceChildren(...chart(sides));
    drawCases(rep);
    $("eval-report").hidden = false;
  }

  // chart is an SVG histogram of each side's scores in ten bins, and a
  // table of the same counts as its text alternative.
  function chart(sides) {
    const ns = "http://www.w3.org/2000/svg";
    const svg = (tag, attrs, text) => {
      const node = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
      if (text !== undefined) node.textContent = text;
      return node;
    };
    const bins = (i) => (i / 10).toFixed(1) + "–" + (i === 9 ? "1" : ((i + 1) / 10).toFixed(1));
    const max = Math.max(1, ...sides.flatMap(([, t]) => t.histogram));
    const W = 440, H = 180, top = 20, base = 150, binW = 40, left = 30;
    const label = "Scores in ten bins from 0 to 1. " + sides.map(([name, t]) => name + ": " +
      t.histogram.map((n, i) => bins(i) + " " + n).join(", ")).join(". ");
    const root = svg("svg", {viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": label, class: "histogram"});
    root.append(svg("line", {x1: left, y1: base, x2: left + 10 * binW, y2: base, class: "axis"}));
    const barW = (binW - 8) / sides.length;
    sides.forEach(([name, t], s) => {
      t.histogram.forEach((n, i) => {
        const h = (base - top) * n / max;
        const bar = svg("rect", {x: left + i * binW + 4 + s * barW, y: base - h, width: barW, height: h,
          class: "bar bar-" + name, "data-series": name, "data-bin": i, "data-count": n});
        bar.append(svg("title", {}, name + " " + bins(i) + ": " + n));
        root.append(bar);
      });
      root.append(svg("rect", {x: left + 10 * binW - 150 + s * 80, y: 4, width: 10, height: 10, class: "bar-" + name}));
      root.append(svg("text", {x: left + 10 * binW - 136 + s * 80, y: 13, class: "legend"}, name));
    });
    for (const [x, text] of [[left, "0"], [left + 5 * binW, "0.5"], [left + 10 * binW, "1"]]) {
      root.append(svg("text", {x, y: base + 16, "text-anchor": "middle", class: "tick"}, text));
    }
    root.append(svg("text", {x: left - 6, y: top + 4, "text-anchor": "end", class: "tick"}, String(max)));
    const table = el("table", {class: "eval-table histogram-counts"},
      el("thead", {}, el("tr", {}, el("th", {scope: "col"}, "score"), sides.map(([name]) => el("th", {scope: "col"}, name)))),
      el("tbody", {}, Array.from({length: 10}, (_, i) => el("tr", {"data-bin": i}, el("th", {scope: "row"}, bins(i)),
        sides.map(([name, t]) => el("td", {"data-series": name}, String(t.histogram[i])))))));
    return [root, el("details", {}, el("summary", {}, "the counts as a table"), table)];
  }

  // sideResult is how a side ended: "skipped", "error", "pass" or "fail".
  function sideResult(s) {
    if (!s) return null;
    return s.skipped ? "skipped" : s.error ? "error" : s.pass ? "pass" : "fail";
  }

  // sideText is a side in a few words.
  function sideText(s) {
    const r = sideResult(s);
    if (r === null || r === "skipped") return r || "";
    return r === "error" ? "error: " + s.error.message : r + " " + (s.score || 0).toFixed(2);
  }

  function drawCases(rep) {
    const base = !!rep.baseline;
    const cols = ["case", "change", "candidate"].concat(base ? ["baseline"] : [], [""]);
    const head = el("tr", {}, cols.map((c) => el("th", {scope: "col"}, c)));
    const rows = [];
    for (const c of rep.cases) {
      const failing = c.change === "regressed" || (!c.candidate.pass && !c.candidate.skipped);
      const detail = el("tr", {class: "case-detail", "data-case": c.id, hidden: true},
        el("td", {colspan: cols.length}, caseDetail(c)));
      const toggle = el("button", {type: "button", class: "case-toggle", "aria-expanded": "false"}, failing ? "why" : "details");
      toggle.addEventListener("click", () => {
        detail.hidden = !detail.hidden;
        toggle.setAttribute("aria-expanded", String(!detail.hidden));
      });
      rows.push(el("tr", {class: "case", "data-case": c.id, "data-change": c.change || null, "data-failing": failing ? "true" : null},
        el("td", {class: "case-id"}, c.id), el("td", {class: "change"}, c.change || ""),
        el("td", {"data-side": "candidate", "data-result": sideResult(c.candidate)}, sideText(c.candidate)),
        base ? el("td", {"data-side": "baseline", "data-result": sideResult(c.baseline)}, sideText(c.baseline)) : null,
        el("td", {}, toggle)), detail);
    }
    $("eval-cases").replaceChildren(el("thead", {}, head), el("tbody", {}, rows));
  }

  // caseDetail is a case's prompt, and each side's scores with their
  // reasons, its run's error, tool calls and answer.
  function caseDetail(c) {
    const parts = [el("p", {class: "case-prompt"}, el("span", {class: "dim"}, "prompt "), c.prompt || "")];
    if (c.from) parts.push(el("p", {class: "dim"}, "replays run " + c.from.run + " of session " + c.from.session));
    const sides = [["candidate", c.candidate]];
    if (c.baseline) sides.push(["baseline", c.baseline]);
    const cols = sides.map(([name, s]) => {
      const run = s.run || {};
      const scores = (s.scores || []).map((sc) => el("li", {"data-scorer": sc.scorer, "data-pass": String(!!sc.pass)},
        (sc.pass ? "✓ " : "✗ ") + sc.scorer + " " + (sc.score || 0).toFixed(2),
        sc.reason ? el("span", {class: "reason"}, " — " + sc.reason) : null,
        sc.error ? el("span", {class: "error"}, " error: " + sc.error) : null));
      const tools = (run.tools || []).map((t) => t.name + " (" + t.status + ")").join(", ");
      return el("div", {class: "case-side", "data-side": name},
        el("h4", {}, name + (run.model ? " · " + run.model : "") + (run.status ? " · " + run.status : "")),
        s.error ? el("p", {class: "error"}, s.error.code + ": " + s.error.message) : null,
        run.error ? el("p", {class: "error"}, run.error.code + ": " + run.error.message) : null,
        scores.length ? el("ul", {class: "scores"}, scores) : null,
        tools ? el("p", {class: "dim"}, "tools: " + tools) : null,
        el("pre", {class: "answer"}, run.answer || ""),
        run.answer_cut ? el("p", {class: "dim"}, "(answer cut)") : null);
    });
    parts.push(el("div", {class: "case-sides"}, cols));
    const a = c.baseline && c.baseline.run ? c.baseline.run.answer || "" : null;
    const b = c.candidate.run ? c.candidate.run.answer || "" : null;
    if (a !== null && b !== null && a !== b) {
      const lines = lineDiff(a.split("\n"), b.split("\n"));
      if (lines) {
        parts.push(el("details", {class: "answer-diff"}, el("summary", {}, "the answers' diff (baseline → candidate)"),
          el("pre", {class: "diff"}, lines.map(([op, text]) =>
            el("span", {class: op === "-" ? "del" : op === "+" ? "ins" : null}, op + " " + text + "\n")))));
      }
    }
    return parts;
  }

  // lineDiff is the lines of a and b as ["-" | "+" | " ", line], by their
  // longest common subsequence; null for answers too long to compare.
  function lineDiff(a, b) {
    if (a.length * b.length > 1e6) return null;
    const n = a.length, m = b.length;
    const lcs = Array.from({length: n + 1}, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    const out = [];
    let i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[i] === b[j]) {
        out.push([" ", a[i]]);
        i++;
        j++;
      } else if (j < m && (i === n || lcs[i][j + 1] >= lcs[i + 1][j])) out.push(["+", b[j++]]);
      else out.push(["-", a[i++]]);
    }
    return out;
  }

  async function cancelEval() {
    const id = view.id;
    if (!id || !window.confirm("Cancel eval " + id + "? No case starts; running cases are cancelled.")) return;
    try {
      await app.call("POST", evalPath(id) + "/cancel");
      refresh();
    } catch (err) {
      showError(err);
    }
  }

  function fromHash() {
    if (!location.hash.startsWith(hashPrefix)) return;
    let id = "";
    try {
      id = decodeURIComponent(location.hash.slice(hashPrefix.length));
    } catch {
      return; // not an encoded ID
    }
    if (id && id !== view.id) openEval(id);
  }

  $("eval-open-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const id = $("eval-open-id").value.trim();
    if (id) openEval(id);
    $("eval-open-id").value = "";
  });
  $("eval-cancel").addEventListener("click", cancelEval);
  app.onSessionOpen(closeEval);
  app.onViewOpen((name) => { if (name !== "eval") closeEval(); });
  app.onKeyChange(() => { if (view.id) refresh(); });
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
