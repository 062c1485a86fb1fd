package gateway_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
	"github.com/keelrun/keel/transcript"
)

// The page shows each use of a tool the model's backend ran itself
// (hosted_tool.activity) as a small card in its step: "⌕ name query →
// N results · detail", the results' URLs under it, links only for http
// and https; a use its attempt's reset dropped is marked abandoned;
// usage rows count the web searches. No scripted model makes hosted
// tools, so the page reads transcript/testdata's hosted stream, with a
// hostile use added before the run's end, from a stand-in for the
// session's routes (the page's own fetch, wrapped).
func TestWebPageShowsHostedTools(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "transcript", "testdata", "hosted.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var envs []keel.Envelope
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var env keel.Envelope
		if err := json.Unmarshal([]byte(line), &env); err != nil {
			t.Fatal(err)
		}
		envs = append(envs, env)
	}
	var body strings.Builder
	var last int64
	for _, env := range envs {
		if env.Type == keel.TypeRunCompleted {
			// A use whose query is markup and whose URLs try other
			// schemes: all of it is text, and only the web URL a link.
			hostile, err := keel.Seal(keel.HostedToolActivity{Step: 2, Attempt: 2, Name: "web_search", ID: "ws_x",
				Query: `<img src=x onerror="window.keelPwned=1">`, Detail: "<b>bold</b>",
				URLs: []string{"javascript:window.keelPwned=1", "data:text/html,hi", "https://example.com/ok"}}, env.SessionID, env.RunID, env.At)
			if err != nil {
				t.Fatal(err)
			}
			hostile.Seq = env.Seq
			writeSSE(t, &body, hostile)
			env.Seq++
		} else if env.Seq > 0 && last >= env.Seq {
			env.Seq = last + 1
		}
		if env.Seq > 0 {
			last = env.Seq
		}
		writeSSE(t, &body, env)
	}
	b := newBrowser(t)
	s := startGateway(t, gateway.Options{})
	b.do("load the page", chromedp.Navigate(s.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open-form")))
	state, _ := json.Marshal(map[string]any{"session_id": "hs", "state": "completed", "last_seq": last,
		"usage": map[string]any{"input_tokens": 1300, "output_tokens": 70, "web_searches": 6, "requests": 3}})
	eval[bool](b, `((events, state) => {
		const real = window.fetch;
		window.fetch = (url, init) => {
			const u = String(url);
			if (u.startsWith("/v1/sessions/hs/events")) {
				// The log, then a stream that stays open.
				const stream = new ReadableStream({start(c) { c.enqueue(new TextEncoder().encode(events)); }});
				return Promise.resolve(new Response(stream, {status: 200, headers: {"Content-Type": "text/event-stream"}}));
			}
			if (u === "/v1/sessions/hs") {
				return Promise.resolve(new Response(state, {status: 200, headers: {"Content-Type": "application/json"}}));
			}
			return real(url, init);
		};
		return true;
	})(`+strconv.Quote(body.String())+`, `+strconv.Quote(string(state))+`)`)
	b.open("hs")
	b.do("run completed", chromedp.WaitVisible(chromedp.CSS(`[data-type="run.completed"]`)))

	heads := eval[[]string](b, `[...document.querySelectorAll(".hosted-card .hosted-head")].map((n) => n.textContent)`)
	want := []string{
		"⌕ web_search keel durable agents → 3 results",
		"⌕ web_search keel release notes",
		"⌕ code_execution · ran 12 lines of Python",
		"⌕ file_search → 2 results · searched 2 files",
		"⌕ web_search lost with its attempt",
		"⌕ web_search keel \x1b[31mrelease\x1b[0m → " + strconv.Itoa(transcript.MaxURLs) + "+ results",
		"⌕ web_search no ID",
		"⌕ web_search no ID either",
		`⌕ web_search <img src=x onerror="window.keelPwned=1"> → 3 results · <b>bold</b>`,
	}
	if !slices.Equal(heads, want) {
		t.Fatalf("hosted cards\n%q\nwant\n%q", heads, want)
	}
	abandoned := eval[[]string](b, `[...document.querySelectorAll(".hosted-card.abandoned")].map((n) => n.dataset.step + "/" + n.dataset.attempt + " " + n.textContent)`)
	if want := []string{"2/1 ⌕ web_search lost with its attempt"}; !slices.Equal(abandoned, want) {
		t.Errorf("abandoned cards %q, want %q", abandoned, want)
	}
	links := eval[[]string](b, `[...document.querySelectorAll(".hosted-card")].map((n) => [...n.querySelectorAll("a")].map((a) => a.protocol + a.rel).join(",")).filter(Boolean)`)
	web := strings.Repeat("https:noopener noreferrer,", 3)
	if len(links) != 3 || links[0] != strings.TrimSuffix(web, ",") || links[2] != "https:noopener noreferrer" {
		t.Errorf("links %q: want the first card's three, the hundred of the sixth, the hostile card's https one only", links)
	}
	if n := eval[int](b, `document.querySelectorAll(".hosted-card img, .hosted-card b").length + (window.keelPwned ? 1000 : 0)`); n != 0 {
		t.Errorf("the backend's text became markup (%d)", n)
	}
	if got := eval[string](b, `document.querySelector('[data-type="hosted_tool.activity"].dim').textContent`); got != "hosted tool web_search" {
		t.Errorf("a use of a step never started shows %q", got)
	}
	if got := eval[string](b, `document.querySelector('[data-type="usage.updated"]').textContent`); !strings.HasSuffix(got, "400 in / 40 out, 1 request, 2 web searches · 0.0218 USD") {
		t.Errorf("usage row %q", got)
	}
	if got := eval[string](b, `document.getElementById("usage").textContent`); !strings.HasPrefix(got, "session 1300 in / 70 out, 3 requests, 6 web searches") {
		t.Errorf("usage line %q", got)
	}
	b.screenshot("hosted-tools")
}

// writeSSE writes env as the gateway's event stream does: its sequence as
// the id of a durable event, its type as the event's name.
func writeSSE(t *testing.T, w *strings.Builder, env keel.Envelope) {
	t.Helper()
	data, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if env.Seq > 0 {
		w.WriteString("id: " + strconv.FormatInt(env.Seq, 10) + "\n")
	}
	w.WriteString("event: " + env.Type + "\ndata: " + string(data) + "\n\n")
}
