package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/gateway"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// The page and its assets load without a key; the session list needs
// one, and lists sessions with the gateway's namespace and Web UI.
func TestWebPageServed(t *testing.T) {
	const key = "web-page-key-0123456789"
	s := startGateway(t, gateway.Options{APIKeys: []string{key}, WebUIURL: "http://127.0.0.1:8233/"})
	for path, want := range map[string]string{
		"/":              "text/html",
		"/web/app.js":    "text/javascript",
		"/web/evals.js":  "text/javascript",
		"/web/style.css": "text/css",
	} {
		r := s.callWith(t, http.MethodGet, path, nil, nil).must(t, http.StatusOK)
		if !strings.HasPrefix(r.header.Get("Content-Type"), want) || len(r.raw) == 0 {
			t.Errorf("GET %s: %s, %d bytes", path, r.header.Get("Content-Type"), len(r.raw))
		}
	}
	s.callWith(t, http.MethodGet, "/web/nothing.js", nil, nil).must(t, http.StatusNotFound)
	s.callWith(t, http.MethodGet, "/v1/sessions", nil, nil).must(t, http.StatusUnauthorized)

	m := model(t, `{"turns":[{"text":["listed"]}]}`)
	s.send(t, "web-listed", map[string]any{"prompt": "hi", "model": m})
	// Temporal's visibility store learns of a new workflow soon after it
	// starts, not at once.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for ; ; <-tick.C {
		list := listSessions(t, s)
		if list.Namespace == "" || list.WebUI != "http://127.0.0.1:8233" {
			t.Fatalf("namespace %q, web UI %q", list.Namespace, list.WebUI)
		}
		i := slices.IndexFunc(list.Sessions, func(s gateway.SessionSummary) bool { return s.ID == "web-listed" })
		if i >= 0 {
			if got := list.Sessions[i]; got.Status != "running" || got.StartedAt.IsZero() {
				t.Fatalf("listed %+v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("web-listed is not in %+v", list.Sessions)
		}
	}
	r := s.call(t, http.MethodGet, "/v1/sessions?limit=0", nil).must(t, http.StatusBadRequest)
	if r.code() != "invalid_input" {
		t.Fatalf("limit=0: %s", r.raw)
	}
}

// The session list shows keel's state of each session, not Temporal's
// status of its workflow, which is running between runs too: a session
// whose run completed is completed, one whose run was cancelled is idle,
// and only one with a run in progress is active (docs/contract.md §10.1).
// The state is the state query's: lean sessions upsert no KeelState; a
// session keel v0.1.0's clients started keeps that shape, and upserts it
// in each of its executions.
func TestSessionListShowsKeelState(t *testing.T) {
	s := startGateway(t, gateway.Options{})
	ctx := testCtx(t)
	oc := newClient(t, 0)
	keeltest.StartReleasedSession(t, oc, "list-old")
	old := s.send(t, "list-old", map[string]any{"prompt": "hi", "model": model(t, `{"turns":[{"text":["done"]}]}`)})
	s.stream(t, ctx, "list-old", "?after="+itoa(old.BaseSeq), nil).until(t, keel.TypeRunCompleted)
	done := s.send(t, "list-done", map[string]any{"prompt": "hi", "model": model(t, `{"turns":[{"text":["done"]}]}`)})
	s.stream(t, ctx, "list-done", "?after="+itoa(done.BaseSeq), nil).until(t, keel.TypeRunCompleted)
	never := model(t, `{"turns":[{"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"never"}}]}]}`)
	cancelled := s.send(t, "list-cancelled", map[string]any{"prompt": "go", "model": never, "tools": []string{"gate"}})
	st := s.stream(t, ctx, "list-cancelled", "?after="+itoa(cancelled.BaseSeq), nil)
	st.until(t, keel.TypeToolStarted)
	s.call(t, http.MethodPost, "/v1/sessions/list-cancelled/cancel", nil).must(t, http.StatusAccepted)
	st.until(t, keel.TypeRunCancelled)
	busy := s.send(t, "list-busy", map[string]any{"prompt": "go", "model": never, "tools": []string{"gate"}})
	s.stream(t, ctx, "list-busy", "?after="+itoa(busy.BaseSeq), nil).until(t, keel.TypeToolStarted)
	defer func() { s.call(t, http.MethodPost, "/v1/sessions/list-busy/cancel", nil).must(t, http.StatusAccepted) }()
	// The scripted model plays a session's turns in order: run 1 had one.
	again := shared.book.Add(t, "list-old", `{"turns":[{"text":["done"]},{"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"never"}}]}]}`)
	old = s.send(t, "list-old", map[string]any{"prompt": "go", "model": again, "tools": []string{"gate"}})
	s.stream(t, ctx, "list-old", "?after="+itoa(old.BaseSeq), nil).until(t, keel.TypeToolStarted)
	defer func() { s.call(t, http.MethodPost, "/v1/sessions/list-old/cancel", nil).must(t, http.StatusAccepted) }()

	want := map[string]gateway.SessionSummary{
		"list-done":      {ID: "list-done", Status: "running", State: keel.StateCompleted, Active: false},
		"list-cancelled": {ID: "list-cancelled", Status: "running", State: keel.StateIdle, Active: false},
		"list-busy":      {ID: "list-busy", Status: "running", State: keel.StateRunning, Active: true},
		"list-old":       {ID: "list-old", Status: "running", State: keel.StateRunning, Active: true},
	}
	// The visibility store lists a new session soon after it starts, not
	// at once: ask until it agrees or the deadline passes.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for ; ; <-tick.C {
		list := listSessions(t, s)
		got := map[string]gateway.SessionSummary{}
		for _, ses := range list.Sessions {
			if _, ok := want[ses.ID]; ok {
				ses.StartedAt = time.Time{}
				got[ses.ID] = ses
			}
		}
		diff := cmp.Diff(want, got)
		if diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listed sessions (-want +got):\n%s", diff)
		}
	}
	// list-old's second execution kept v0.1.0's shape: it upserted its
	// run's state, which visibility shows once it has caught up.
	for ; ; <-tick.C {
		resp, err := oc.Temporal().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: "WorkflowId = 'list-old' AND ExecutionStatus = 'Running' AND KeelState = 'running' AND KeelRunNumber = 2"})
		if err == nil && len(resp.GetExecutions()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("visibility's KeelState of list-old: %v, %d executions, want its second execution's running", err, len(resp.GetExecutions()))
		}
	}
}

// browserPath finds a headless Chromium. Without one the test is skipped,
// unless CI is set (.ci/run installs one), where it fails.
func browserPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no headless Chromium on PATH; .ci/run installs chromium-headless-shell")
	}
	t.Skip("no headless Chromium on PATH: apt-get install chromium-headless-shell (with CI set, this test fails instead)")
	return ""
}

// browser is one headless Chromium tab and where its screenshots go.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string
	n     int
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browserPath(t)),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The first action starts the browser; it must not run under a
	// timeout, which would stop the browser with it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", browserPath(t), err)
	}
	dir := os.Getenv("KEEL_SCREENSHOTS")
	if dir == "" {
		dir = t.ArtifactDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx, shots: dir}
}

// do runs steps with a deadline; on failure it shows what the page shows.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail(what, err)
	}
}

func (b *browser) fail(what string, err error) {
	b.t.Helper()
	b.screenshot("failed")
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	b.t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, text)
}

// poll waits until expression (JavaScript) is truthy and returns it.
func poll[T any](b *browser, what, expression string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Poll[T](expression, chromedp.WithPollingInterval(20*time.Millisecond),
		chromedp.WithPollingTimeout(40*time.Second)))
	if err != nil {
		b.fail(what, err)
	}
	return v
}

func eval[T any](b *browser, expression string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		b.fail(expression, err)
	}
	return v
}

// screenshot saves the whole page as TestName-NN-name.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	b.n++
	path := filepath.Join(b.shots, fmt.Sprintf("%s-%02d-%s.png", b.t.Name(), b.n, name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	b.t.Logf("screenshot: %s", path)
}

// open opens a session through the page's form, as a person would.
func (b *browser) open(session string) {
	b.t.Helper()
	b.fill("#open-id", session)
	b.do("open "+session,
		chromedp.Click(chromedp.CSS("#open-form button")),
		chromedp.WaitVisible(chromedp.CSS("#session")))
	poll[bool](b, "session "+session+" shown", `document.getElementById("session-id").textContent === "`+session+`"`)
}

// fill sets the value of the input that sel (CSS) selects.
func (b *browser) fill(sel, value string) {
	b.t.Helper()
	js, _ := json.Marshal([]string{sel, value})
	eval[bool](b, `((a) => { document.querySelector(a[0]).value = a[1]; return true; })(`+string(js)+`)`)
}

// send types a prompt and sends it with the given model and tools.
func (b *browser) send(prompt, model, tools string) {
	b.t.Helper()
	b.fill("#model", model)
	b.fill("#tools", tools)
	b.fill("#prompt", prompt)
	b.do("send "+prompt, chromedp.Click(chromedp.CSS("#send")))
}

// renderedSeqs lists the data-seq of the rendered log, in sequence order.
const renderedSeqs = `[...document.querySelectorAll("#log [data-seq]")].map((e) => Number(e.dataset.seq)).sort((a, b) => a - b)`

// The page in a real browser: a prompt's text streams in before the run
// ends and is replaced by the final text; an ask_user question is answered
// in place; a run is cancelled; a reload in the middle of a run shows the
// log again and resumes after its last event, none missing or repeated.
func TestWebPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	b := newBrowser(t)
	s := startGateway(t, gateway.Options{WebUIURL: "http://127.0.0.1:8233"})
	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))

	// Streaming: ten chunks 200 ms apart.
	chunks := make([]string, 10)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("word%d ", i)
	}
	script, _ := json.Marshal(map[string]any{"chunk_delay": "200ms", "turns": []any{map[string]any{"text": chunks}}})
	b.open("web-stream")
	b.send("stream please", model(t, string(script)), "")
	type streaming struct {
		Live      string `json:"live"`
		Completed bool   `json:"completed"`
	}
	seen := poll[streaming](b, "streamed text", `(() => {
		const live = document.querySelector(".live-text");
		return live && live.textContent.includes("word") &&
			{live: live.textContent, completed: !!document.querySelector('[data-type="run.completed"]')};
	})()`)
	if seen.Completed {
		t.Fatalf("streamed text %q was first seen after run.completed", seen.Live)
	}
	b.screenshot("streaming")
	b.do("run completed", chromedp.WaitVisible(chromedp.CSS(`[data-type="run.completed"] .bubble`)))
	final := eval[string](b, `document.querySelector('[data-type="run.completed"] .bubble').textContent`)
	if want := strings.Join(chunks, ""); final != want {
		t.Fatalf("final text %q, want %q", final, want)
	}
	if n := eval[int](b, `document.querySelectorAll(".live-text").length`); n != 0 {
		t.Fatalf("%d streamed blocks left beside the final text", n)
	}
	href := eval[string](b, `document.querySelector("a.temporal-run").href`)
	// The run executes in its session's workflow: the link opens that.
	if want := "http://127.0.0.1:8233/namespaces/" + s.gw.Client().Namespace() + "/workflows/web-stream"; href != want {
		t.Fatalf("Temporal link %q, want %q", href, want)
	}
	poll[bool](b, "state completed", `document.getElementById("state").dataset.state === "completed"`)
	b.screenshot("completed")

	// Host input: an ask_user question answered in the page.
	b.open("web-ask")
	poll[bool](b, "new session", `document.getElementById("state").dataset.state === "new"`)
	b.send("ask me", model(t, `{"turns":[
		{"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Which colour?","schema":{"type":"string"}}}]},
		{"text":["Thanks."]}]}`), "ask_user")
	b.do("question shown", chromedp.WaitVisible(chromedp.CSS(`.tool-card[data-call="q1"] .question[data-open="true"] .answer-input`)))
	if p := eval[string](b, `document.querySelector(".question-prompt").textContent`); p != "Which colour?" {
		t.Fatalf("question %q", p)
	}
	poll[bool](b, "state waiting", `document.getElementById("state").dataset.state === "waiting_for_host_input"`)
	b.screenshot("question")
	b.do("answer", chromedp.SendKeys(chromedp.CSS(".answer-input"), "blue"), chromedp.Click(chromedp.CSS(".answer-send")))
	b.do("answered", chromedp.WaitVisible(chromedp.CSS(`.question[data-open="false"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-type="run.completed"]`)))
	if out := eval[string](b, `document.querySelector('.tool-card[data-call="q1"] .tool-output').textContent`); !strings.Contains(out, "blue") {
		t.Fatalf("tool result %q does not hold the answer", out)
	}
	b.screenshot("answered")

	// Cancel: a long stream cancelled from the page.
	long := make([]string, 200)
	for i := range long {
		long[i] = fmt.Sprintf("w%d ", i)
	}
	script, _ = json.Marshal(map[string]any{"chunk_delay": "100ms", "turns": []any{map[string]any{"text": long}}})
	b.open("web-cancel")
	b.send("talk for long", model(t, string(script)), "")
	poll[bool](b, "streaming before cancel", `(() => { const l = document.querySelector(".live-text"); return !!l && l.textContent.length > 0; })()`)
	b.do("cancel", chromedp.Click(chromedp.CSS("#cancel")),
		chromedp.WaitVisible(chromedp.CSS(`[data-type="run.cancelled"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.run-start[data-outcome="cancelled"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.live-text.aborted`)))
	if eval[bool](b, `!!document.querySelector('[data-type="run.completed"]')`) {
		t.Fatal("the cancelled run completed")
	}
	poll[bool](b, "state idle after cancel", `document.getElementById("state").dataset.state === "idle"`)
	b.screenshot("cancelled")

	// Reload mid-run: the run waits in a tool, the page reloads, the run
	// goes on and the log resumes.
	b.open("web-reload")
	b.send("work", model(t, `{"chunk_delay":"50ms","turns":[
		{"text":["Let me ", "wait."],"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"web-reload"}}]},
		{"text":["The ", "gate ", "opened."]}]}`), "gate")
	b.do("tool running", chromedp.WaitVisible(chromedp.CSS(`.tool-card[data-call="g1"][data-status="running"]`)))
	before := eval[[]int64](b, renderedSeqs)
	b.screenshot("before-reload")
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`.tool-card[data-call="g1"]`)))
	poll[bool](b, "stream live after reload", `document.getElementById("conn").dataset.state === "live"`)
	after := eval[[]int64](b, renderedSeqs)
	if !slices.Equal(before, after) {
		t.Fatalf("after the reload the log shows %v, before it %v", after, before)
	}
	shared.gates.open("web-reload")
	b.do("run completed after reload", chromedp.WaitVisible(chromedp.CSS(`[data-type="run.completed"]`)))
	if final := eval[string](b, `document.querySelector('[data-type="run.completed"] .bubble').textContent`); final != "The gate opened." {
		t.Fatalf("final text %q", final)
	}
	got := eval[[]int64](b, renderedSeqs)
	r := s.call(t, http.MethodGet, "/v1/sessions/web-reload/events?after=0&limit=500", nil).must(t, http.StatusOK)
	var page gateway.EventsPage
	if err := json.Unmarshal(r.raw, &page); err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, ev := range page.Events {
		want = append(want, ev.Seq)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the page shows events %v, the session's log has %v", got, want)
	}
	contiguous(t, got, 1)
	if len(got) <= len(before) {
		t.Fatalf("no events after the reload: %v", got)
	}
	b.screenshot("resumed")

	// The session list shows the sessions and opens one.
	// Temporal's visibility store may list a new session late: refresh
	// the list every half second until it shows.
	poll[bool](b, "sessions listed", `(() => {
		if (document.querySelector('#sessions li[data-session="web-stream"]')) return true;
		if (!(Date.now() - (window.lastRefresh || 0) < 500)) {
			window.lastRefresh = Date.now();
			document.getElementById("refresh").click();
		}
		return false;
	})()`)
	b.do("open from the list", chromedp.Click(chromedp.CSS(`#sessions li[data-session="web-stream"] button`)))
	poll[bool](b, "listed session opened", `document.getElementById("session-id").textContent === "web-stream" &&
		!!document.querySelector('[data-type="run.completed"]')`)
	if link := eval[string](b, `document.getElementById("temporal-link").href`); !strings.HasSuffix(link, "/workflows/web-stream") {
		t.Fatalf("session link %q", link)
	}
	b.screenshot("sessions")
}

// listedState waits until the page's session list, refreshed every half
// second (the visibility store learns of a change late), shows session
// in state, and returns the text it shows.
func (b *browser) listedState(session, state string) string {
	b.t.Helper()
	sel, _ := json.Marshal(`#sessions li[data-session="` + session + `"] .status`)
	want, _ := json.Marshal(state)
	return poll[string](b, session+" listed as "+state, `(() => {
		const s = document.querySelector(`+string(sel)+`);
		if (s && s.dataset.state === `+string(want)+`) return s.textContent;
		if (!(Date.now() - (window.lastRefresh || 0) < 500)) {
			window.lastRefresh = Date.now();
			document.getElementById("refresh").click();
		}
		return "";
	})()`)
}

// The page shows keel's state of a session, in the list and beside the
// open session, and offers Cancel only while a run is active: a session
// whose run completed or was cancelled has a running Temporal workflow
// (waiting for its next prompt) but nothing to cancel (docs/contract.md
// §10.1).
func TestWebPageShowsKeelState(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	b := newBrowser(t)
	s := startGateway(t, gateway.Options{})
	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	const cancelShown = `!document.getElementById("cancel").hidden && document.getElementById("cancel").offsetParent !== null`

	b.open("web-state-done")
	if eval[bool](b, cancelShown) {
		t.Fatal("Cancel offered for a session with no run")
	}
	b.send("hi", model(t, `{"turns":[{"text":["done"]}]}`), "")
	b.do("run completed", chromedp.WaitVisible(chromedp.CSS(`[data-type="run.completed"]`)))
	poll[bool](b, "state completed", `document.getElementById("state").dataset.state === "completed"`)
	if eval[bool](b, cancelShown) {
		t.Fatal("Cancel offered after the run completed")
	}
	if got := b.listedState("web-state-done", "completed"); got != "completed" {
		t.Fatalf("listed as %q", got)
	}

	b.open("web-state-busy")
	b.send("go", model(t, `{"turns":[{"tool_calls":[{"id":"g","name":"gate","arguments":{"key":"never"}}]}]}`), "gate")
	b.do("tool running", chromedp.WaitVisible(chromedp.CSS(`.tool-card[data-call="g"][data-status="running"]`)))
	poll[bool](b, "Cancel offered while the run is active", cancelShown)
	if got := b.listedState("web-state-busy", "running"); got != "running" {
		t.Fatalf("listed as %q", got)
	}
	b.screenshot("running")
	b.do("cancel", chromedp.Click(chromedp.CSS("#cancel")), chromedp.WaitVisible(chromedp.CSS(`[data-type="run.cancelled"]`)))
	poll[bool](b, "state idle, no Cancel", `document.getElementById("state").dataset.state === "idle" && !(`+cancelShown+`)`)
	if got := b.listedState("web-state-busy", "idle"); got != "idle" {
		t.Fatalf("listed as %q", got)
	}
	// The completed session still reads completed, and opening it offers
	// no Cancel.
	b.do("open from the list", chromedp.Click(chromedp.CSS(`#sessions li[data-session="web-state-done"] button`)))
	poll[bool](b, "completed session opened", `document.getElementById("session-id").textContent === "web-state-done" &&
		document.getElementById("state").dataset.state === "completed"`)
	if eval[bool](b, cancelShown) {
		t.Fatal("Cancel offered for a completed session opened from the list")
	}
	b.screenshot("idle")
}

// The page shows what a session's runs cost (docs/contract.md §20): the
// usage line per run and per session carries the cost of the priced
// model's requests, naming its price table in the tooltip, and "≥" once
// a request had no price; each budget.warning is a row of the log, money
// and tokens, and the run a budget stopped ends failed with
// keel.BudgetExceeded.
func TestWebPageShowsMoney(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	b := newBrowser(t)
	s := startGateway(t, gateway.Options{})
	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	shared.gates.open("web-money")
	// One request of 4,200 prompt and 50 answer tokens: 0.042 + 0.00005 =
	// 0.04205 USD, past 80% of the 0.05 budget and of its 5,000 tokens;
	// the next request's estimate (its prompt and 4,096 tokens of answer)
	// would pass the tokens left, so it is never sent.
	priced := shared.book.Add(t, "priced", `{"turns":[
		{"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"web-money"}}],"usage":{"input_tokens":4200,"output_tokens":50}},
		{"text":["never sent"],"usage":{"input_tokens":1,"output_tokens":1}}]}`)
	if priced != pricedModel {
		t.Fatalf("script %s, the worker prices %s", priced, pricedModel)
	}
	s.send(t, "web-money", map[string]any{"prompt": "spend", "model": priced, "tools": []string{"gate"},
		"budget": map[string]any{"max": 0.05, "currency": "USD", "max_tokens": 5000}})
	b.open("web-money")
	b.do("run stopped by its budget", chromedp.WaitVisible(chromedp.CSS(`[data-type="run.failed"]`)))
	if got := eval[string](b, `document.querySelector('[data-type="run.failed"]').textContent`); !strings.Contains(got, "keel.BudgetExceeded") {
		t.Fatalf("run.failed shows %q", got)
	}
	warnings := eval[[]string](b, `[...document.querySelectorAll('[data-type="budget.warning"]')].map((e) => e.textContent).sort()`)
	if want := []string{
		"budget warning: run budget (caller) 0.04205 of 0.05 USD",
		"budget warning: run budget (caller) 4250 of 5000 tokens",
	}; !slices.Equal(warnings, want) {
		t.Fatalf("budget warnings %q, want %q", warnings, want)
	}
	if got := eval[string](b, `document.querySelector('[data-type="usage.updated"]').textContent`); !strings.HasSuffix(got, "4200 in / 50 out, 1 request · 0.04205 USD") {
		t.Fatalf("usage row %q", got)
	}
	const usageLine = `document.getElementById("usage").textContent`
	line := poll[string](b, "the session's usage with its cost", `(() => {
		const u = `+usageLine+`;
		return u.split(" · this run ")[0].includes("USD") && u;
	})()`)
	if want := "session 4200 in / 50 out, 1 request · 0.04205 USD · this run 4200 in / 50 out, 1 request · 0.04205 USD"; line != want {
		t.Fatalf("usage line %q, want %q", line, want)
	}
	if title := eval[string](b, `document.getElementById("usage").title`); title != "priced by gateway test prices" {
		t.Fatalf("usage tooltip %q", title)
	}
	b.screenshot("budget")

	// A model without a price: its run shows tokens only, and the session's
	// cost is now a lower bound.
	// (The scripted model answers the session's second model turn with
	// its second.)
	b.send("free", model(t, `{"turns":[{"text":["unused"]},{"text":["free"],"usage":{"input_tokens":10,"output_tokens":2}}]}`), "")
	b.do("unpriced run completed", chromedp.WaitVisible(chromedp.CSS(`[data-type="run.completed"]`)))
	line = poll[string](b, "the session's usage after the unpriced run", `(() => {
		const u = `+usageLine+`;
		return u.split(" · this run ")[0].includes("≥") && u;
	})()`)
	if want := "session 4210 in / 52 out, 2 requests · ≥ 0.04205 USD · this run 10 in / 2 out, 1 request"; line != want {
		t.Fatalf("usage line %q, want %q", line, want)
	}
	b.screenshot("unpriced")
}

// A step waiting for its turn under a rate limit shows it on the page
// (docs/contract.md §20.5): "waiting … for rate limit scripted:limited"
// under the step until its first text, and until a cancel ends the run.
// The shared worker holds scripted:limited to 6 requests a minute, one
// at once: the session's first run goes at once, the next two wait for
// the ten seconds each takes.
func TestWebPageShowsRateLimitWait(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	b := newBrowser(t)
	s := startGateway(t, gateway.Options{})
	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	limited := shared.book.Add(t, "limited", `{"turns":[{"text":["first"]},{"text":["second"]},{"text":["third"]}]}`)
	if limited != limitedModel {
		t.Fatalf("script %s, the worker limits %s", limited, limitedModel)
	}
	b.open("web-rate-wait")
	// Every wait notice the page adds, as it adds it: one may come and go
	// between two looks.
	eval[bool](b, `(() => {
		window.keelWaits = [];
		new MutationObserver((muts) => {
			for (const m of muts) for (const n of m.addedNodes) {
				if (n.classList && n.classList.contains("live-wait")) window.keelWaits.push(n);
			}
		}).observe(document.getElementById("log"), {childList: true});
		return true;
	})()`)
	b.send("one", limited, "")
	b.do("first run completed", chromedp.WaitVisible(chromedp.CSS(`[data-type="run.completed"]`)))
	b.send("two", limited, "")
	poll[bool](b, "second run completed", `document.querySelectorAll('[data-type="run.completed"]').length === 2`)
	shown := eval[[]string](b, `window.keelWaits.map((n) => n.textContent)`)
	if len(shown) != 1 || !strings.HasPrefix(shown[0], "waiting ") || !strings.HasSuffix(shown[0], " s for rate limit scripted:limited") {
		t.Fatalf("wait notices shown %q, want one for the second run", shown)
	}
	if n := eval[int](b, `document.querySelectorAll(".live-wait").length`); n != 0 {
		t.Fatalf("%d wait notices left after the run streamed and completed", n)
	}
	if got := eval[string](b, `[...document.querySelectorAll('[data-type="run.completed"]')].pop().textContent`); !strings.Contains(got, "second") {
		t.Fatalf("second run shows %q", got)
	}

	b.send("three", limited, "")
	poll[bool](b, "the third run waits", `document.querySelectorAll(".live-wait").length === 1`)
	b.screenshot("rate-limit-wait")
	b.do("cancel", chromedp.Click(chromedp.CSS("#cancel")), chromedp.WaitVisible(chromedp.CSS(`[data-type="run.cancelled"]`)))
	if n := eval[int](b, `document.querySelectorAll(".live-wait").length`); n != 0 {
		t.Fatalf("%d wait notices left after the cancel", n)
	}
	if n := eval[int](b, `window.keelWaits.length`); n != 2 {
		t.Fatalf("%d wait notices shown, want 2", n)
	}
}

// The page reconnects by itself when its gateway goes away in the middle
// of a run and another comes up at the same address: the run's events
// recorded meanwhile appear, none missing or repeated.
func TestWebPageReconnects(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	b := newBrowser(t)
	first := listenGateway(t, "127.0.0.1:0")
	addr := first.ln.Addr().String()
	b.do("load the page", chromedp.Navigate("http://"+addr+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	b.open("web-reconnect")
	b.send("work", model(t, `{"turns":[
		{"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"web-reconnect-1"}}]},
		{"text":["between"],"tool_calls":[{"id":"g2","name":"gate","arguments":{"key":"web-reconnect-2"}}]},
		{"text":["done"]}]}`), "gate")
	b.do("first call running", chromedp.WaitVisible(chromedp.CSS(`.tool-card[data-call="g1"][data-status="running"]`)))
	poll[bool](b, "stream live", `document.getElementById("conn").dataset.state === "live"`)

	// The gateway goes away; the run goes on without it.
	first.stop()
	poll[bool](b, "page reconnecting", `document.getElementById("conn").dataset.state === "reconnecting"`)
	shared.gates.open("web-reconnect-1")
	waitForEvent(t, testCtx(t), "web-reconnect", "tool.started", 2)
	b.screenshot("reconnecting")

	listenGateway(t, addr)
	b.do("second call running", chromedp.WaitVisible(chromedp.CSS(`.tool-card[data-call="g2"][data-status="running"]`)))
	shared.gates.open("web-reconnect-2")
	b.do("run completed", chromedp.WaitVisible(chromedp.CSS(`[data-type="run.completed"]`)))
	got := eval[[]int64](b, renderedSeqs)
	contiguous(t, got, 1)
	c := newClient(t, 0)
	evs, _, err := c.Session("web-reconnect").EventsPage(testCtx(t), 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(got) {
		t.Fatalf("the page shows events %v, the session's log has %d", got, len(evs))
	}
	poll[bool](b, "stream live again", `document.getElementById("conn").dataset.state === "live"`)
	b.screenshot("reconnected")
}

// The page keeps the API key for its tab only: in sessionStorage, never
// in localStorage (where it would stay on the disk for whoever uses the
// browser profile next); a key an older page left in localStorage moves
// to the tab and is removed. Another tab starts without a key. A log this
// tab cached for a session recreated since (its cursor past the log's
// end, 409 cursor_ahead) is dropped and read again from the start.
func TestWebPageKeepsKeyForTheTab(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	const key = "web-tab-key-0123456789"
	b := newBrowser(t)
	lg := listenGatewayWith(t, "127.0.0.1:0", gateway.Options{APIKeys: []string{key}})
	url := "http://" + lg.ln.Addr().String() + "/"
	b.do("load the page", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	keyJS, _ := json.Marshal(key)
	eval[bool](b, `localStorage.setItem("keel.apiKey", `+string(keyJS)+`), true`)
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	poll[bool](b, "the key moved to the tab", `sessionStorage.getItem("keel.apiKey") === `+string(keyJS)+
		` && localStorage.getItem("keel.apiKey") === null && document.getElementById("api-key").value === `+string(keyJS))
	// Typed in the field, the key goes to the tab's storage.
	b.fill("#api-key", key)
	eval[bool](b, `document.getElementById("api-key").dispatchEvent(new Event("change")), true`)
	if !eval[bool](b, `localStorage.length === 0 && sessionStorage.getItem("keel.apiKey") === `+string(keyJS)) {
		t.Fatal("the page keeps the key beyond its tab")
	}

	// A log cached for a session that has since been recreated: seq 1000
	// is past the end of the real session's log.
	kc := newClient(t, 0)
	run, err := kc.Session("web-tab-stale").Send(testCtx(t), "go", client.WithConfig(api.RunConfig{Model: model(t, `{"turns":[
		{"tool_calls":[{"id":"g1","name":"gate","arguments":{"key":"web-tab-stale"}}]},{"text":["done"]}]}`), Tools: []string{"gate"}}))
	if err != nil {
		t.Fatal(err)
	}
	waitForEvent(t, testCtx(t), "web-tab-stale", "tool.started", 1)
	stale, _ := json.Marshal([]map[string]any{{"seq": 1000, "type": "run.started", "session_id": "web-tab-stale",
		"run_id": "web-tab-stale/run-9", "at": "2026-01-01T00:00:00Z", "data": map[string]any{"number": 9, "prompt": "stale"}}})
	eval[bool](b, `sessionStorage.setItem("keel.log.web-tab-stale", `+strconv.Quote(string(stale))+`), true`)
	b.open("web-tab-stale")
	b.do("first call running", chromedp.WaitVisible(chromedp.CSS(`.tool-card[data-call="g1"][data-status="running"]`)))
	shared.gates.open("web-tab-stale")
	b.do("run completed", chromedp.WaitVisible(chromedp.CSS(`[data-type="run.completed"]`)))
	got := eval[[]int64](b, renderedSeqs)
	contiguous(t, got, 1)
	if o, err := run.Outcome(testCtx(t)); err != nil || len(got) == 0 {
		t.Fatalf("outcome %v %v, rendered %v", o, err, got)
	}
	b.screenshot("stale-log-replaced")

	// Another tab of the same browser has no key.
	tab, cancel := chromedp.NewContext(b.ctx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(tab, 45*time.Second)
	defer cancelT()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#open-form"))); err != nil {
		t.Fatal(err)
	}
	v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("api-key").value === "" && sessionStorage.getItem("keel.apiKey") === null`))
	if err != nil || !v {
		t.Fatalf("a new tab has the key: %v %v", v, err)
	}
}

// liveGateway is a gateway on a listener of its own, so a test can stop
// it and serve another at the same address.
type liveGateway struct {
	gw  *gateway.Gateway
	srv *http.Server
	ln  net.Listener
}

func listenGateway(t *testing.T, addr string) *liveGateway {
	t.Helper()
	return listenGatewayWith(t, addr, gateway.Options{})
}

func listenGatewayWith(t *testing.T, addr string, opts gateway.Options) *liveGateway {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	opts.Logger = errorLogger(t)
	gw, err := gateway.New(newClient(t, 0), opts)
	if err != nil {
		t.Fatal(err)
	}
	lg := &liveGateway{gw: gw, srv: &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}, ln: ln}
	go func() { _ = lg.srv.Serve(ln) }()
	t.Cleanup(lg.stop)
	return lg
}

func (lg *liveGateway) stop() {
	lg.gw.Close()
	_ = lg.srv.Close()
}

// listSessions reads the first page of the session list.
func listSessions(t *testing.T, s *stack) gateway.SessionsResponse {
	t.Helper()
	r := s.call(t, http.MethodGet, "/v1/sessions?limit=200", nil).must(t, http.StatusOK)
	var list gateway.SessionsResponse
	if err := json.Unmarshal(r.raw, &list); err != nil {
		t.Fatal(err)
	}
	return list
}
