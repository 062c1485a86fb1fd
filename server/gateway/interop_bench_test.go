package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/gateway"
)

// interopFirstChunk is the first text chunk of the benchmark's runs: the
// update each surface is timed to.
const interopFirstChunk = `{"n"`

// BenchmarkInteropFirstUpdate times, for the same kind of run (the typed
// agent streaming two chunks) on the same gateway, the time from the
// request that starts the run to the first streamed text reaching the
// client: through keel's own API (POST runs to a session whose event
// stream the client holds open, as docs/gateway.md's tour does; the
// first text.delta), through A2A (message/stream continuing one context,
// and message/stream starting a new one; the first artifact-update) and
// through MCP (tools/call, which always starts a session; the first
// progress notification carrying the text). Each iteration runs each
// once, in turn; the p50 of each and its ratio to keel's own are
// reported.
func BenchmarkInteropFirstUpdate(b *testing.B) {
	shared.book.Add(b, "typed", `{"repeat":true,"turns":[{"text":["`+strings.ReplaceAll(interopFirstChunk, `"`, `\"`)+`", ": 1}"]}]}`)
	s := startGateway(b, gateway.Options{Agents: interopAgents()})
	ctx := testCtx(b)
	var mu sync.Mutex
	var sawAt time.Time
	cs := mcpConnect(b, ctx, s, "", &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		if r.Params.Message == interopFirstChunk && sawAt.IsZero() {
			sawAt = time.Now()
		}
	}})
	// keel's own: one session, its stream open; A2A's continued
	// context: one session too. A first run makes each.
	own := fmt.Sprintf("bench-own-%d", benchSessions.Add(1))
	s.send(b, own, map[string]any{"prompt": "count", "agent": "typed"})
	f := &ownFollow{s: s, ctx: ctx, session: own}
	f.open(b, "0")
	defer func() { f.st.close() }()
	f.st.until(b, keel.TypeRunCompleted)
	a2aContext := firstUpdateA2A(b, ctx, s, "").context
	var viaOwn, viaA2A, viaA2ANew, viaMCP latencies
	b.ResetTimer()
	for i := range b.N {
		if d, ok := f.firstUpdate(b); ok {
			viaOwn = append(viaOwn, d)
		}
		viaA2A = append(viaA2A, firstUpdateA2A(b, ctx, s, a2aContext).first)
		viaA2ANew = append(viaA2ANew, firstUpdateA2A(b, ctx, s, "").first)
		mu.Lock()
		sawAt = time.Time{}
		mu.Unlock()
		start := time.Now()
		p := &mcp.CallToolParams{Name: "agent__typed", Arguments: map[string]any{"task": "count"}}
		p.SetProgressToken(i + 1)
		if _, err := cs.CallTool(ctx, p); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		if sawAt.IsZero() {
			b.Fatal("MCP: no progress notification with the first chunk")
		}
		viaMCP = append(viaMCP, sawAt.Sub(start))
		mu.Unlock()
	}
	b.StopTimer()
	o, a, an, m := viaOwn.pct(50), viaA2A.pct(50), viaA2ANew.pct(50), viaMCP.pct(50)
	b.ReportMetric(ms(o), "own-p50-ms")
	b.ReportMetric(ms(a), "a2a-p50-ms")
	b.ReportMetric(ms(an), "a2a-new-p50-ms")
	b.ReportMetric(ms(m), "mcp-p50-ms")
	b.ReportMetric(float64(a)/float64(o), "a2a/own")
	b.ReportMetric(float64(an)/float64(o), "a2a-new/own")
	b.ReportMetric(float64(m)/float64(o), "mcp/own")
	b.Logf("first streamed text, p50 (p90) over %d runs each: keel SSE %.1f ms (%.1f); A2A, same context %.1f ms (%.1f), %.2fx; "+
		"A2A, new context %.1f ms (%.1f), %.2fx; MCP (new session) %.1f ms (%.1f), %.2fx",
		b.N, ms(o), ms(viaOwn.pct(90)), ms(a), ms(viaA2A.pct(90)), float64(a)/float64(o),
		ms(an), ms(viaA2ANew.pct(90)), float64(an)/float64(o), ms(m), ms(viaMCP.pct(90)), float64(m)/float64(o))
}

// ownFollow is keel's own event stream of one session, held open
// across the benchmark's runs.
type ownFollow struct {
	s       *stack
	ctx     context.Context
	session string
	st      *sseStream
	last    string // the last durable event's id
}

func (f *ownFollow) open(b *testing.B, after string) {
	f.st, f.last = f.s.stream(b, f.ctx, f.session, "?after="+after, nil), after
}

// firstUpdate starts a run through keel's API in the session and reads
// the stream until the run's first text delta, then to its end. When
// the stream breaks (a loaded machine's Temporal connection can), it
// is resumed after the last durable event, as a client does with
// Last-Event-ID, and the sample is dropped.
func (f *ownFollow) firstUpdate(b *testing.B) (time.Duration, bool) {
	start := time.Now()
	f.s.send(b, f.session, map[string]any{"prompt": "count", "agent": "typed"})
	var d time.Duration
	for {
		ev, err := f.st.next()
		if err != nil {
			b.Logf("keel's event stream broke (%v); resuming after %s", err, f.last)
			f.st.close()
			f.open(b, f.last)
			f.st.until(b, keel.TypeRunCompleted)
			return 0, false
		}
		if ev.id != "" {
			f.last = ev.id
		}
		switch {
		case ev.event == keel.TypeTextDelta && d == 0:
			d = time.Since(start)
		case ev.event == keel.TypeRunCompleted:
			return d, d > 0
		}
	}
}

// a2aFirst is what firstUpdateA2A measured, and the task's context.
type a2aFirst struct {
	first   time.Duration
	context string
}

// firstUpdateA2A sends message/stream (in contextID, or a new context)
// and reads until the first artifact-update (then to the task's end).
func firstUpdateA2A(b *testing.B, ctx context.Context, s *stack, contextID string) a2aFirst {
	ctxField := ""
	if contextID != "" {
		ctxField = `"contextId":"` + contextID + `",`
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"kind":"message","messageId":"m",` + ctxField +
		`"role":"user","parts":[{"kind":"text","text":"count"}]}}}`
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL+"/v1/a2a/typed", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		var r struct {
			Result struct {
				Kind      string `json:"kind"`
				ContextID string `json:"contextId"`
			} `json:"result"`
		}
		if json.Unmarshal(data, &r) == nil && r.Result.Kind == "artifact-update" {
			d := time.Since(start)
			for sc.Scan() { // to the task's end, so runs do not overlap
			}
			return a2aFirst{first: d, context: r.Result.ContextID}
		}
	}
	b.Fatalf("A2A stream ended without an artifact-update: %v", sc.Err())
	return a2aFirst{}
}
