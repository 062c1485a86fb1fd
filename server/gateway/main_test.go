package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/gateway"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/natsserver"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// shared is one embedded Temporal server, one embedded NATS server and one
// worker publishing deltas to NATS, for all of the package's tests; each
// test has its own sessions, scripts and gateways.
var shared struct {
	srv   *devserver.Server
	nats  *natsserver.Server
	tc    sdkclient.Client
	book  keeltest.ScriptBook
	gates gates
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(readerEnv); spec != "" {
		os.Exit(runReader(spec))
	}
	flag.Parse()
	if fuzzing() {
		// Fuzz targets call the gateway's parsers and writers alone: no
		// server, and no server in each fuzz worker process.
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

// fuzzing reports whether the test binary runs fuzz targets (-fuzz) or is
// one of their worker processes.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	w := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() != "" || w != nil && w.Value.String() == "true"
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	srv, err := devserver.Start(ctx, devserver.Config{Port: devserver.AnyPort, DisableUI: true})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start server:", err)
		return 1
	}
	defer srv.Stop()
	ns, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start NATS:", err)
		return 1
	}
	defer ns.Shutdown()
	shared.srv, shared.nats = srv, ns
	shared.gates.m = map[string]chan struct{}{}
	tc, err := srv.Dial(context.Background(), sdkclient.Options{DataConverter: converter.GetDefaultDataConverter()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1
	}
	defer tc.Close()
	shared.tc = tc
	pub, err := live.DialNATS(ns.ClientURL(), live.NATSOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "NATS:", err)
		return 1
	}
	defer pub.Close()
	w, err := worker.New(tc, worker.Options{Models: &shared.book, Tools: testTools(), Live: pub, StopTimeout: time.Second,
		Policy: activities.Policy{Prices: map[string]keel.Price{pricedModel: testPrice},
			RateLimits: map[string]activities.RateLimit{limitedModel: {RequestsPerMinute: limitedPerMinute}}}, Agents: testAgents})
	if err == nil {
		err = w.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer w.Stop()
	return m.Run()
}

// testAgents are the shared worker's agents (docs/contract.md §21.2): a
// test adds the scripts they run under the names "planner" and
// "researcher" (shared.book.Add).
var testAgents = map[string]delegation.AgentSpec{
	"planner": {Name: "planner", Model: "scripted:planner", Instructions: "Delegate.",
		Tools: []string{"agent__researcher"}, Agents: []string{"researcher"}},
	"researcher": {Name: "researcher", Model: "scripted:researcher", Instructions: "Find facts.", Tools: []string{"gate"}},
	// The interop tests' agents (interop_test.go): one that may ask the
	// host, and one whose answers have a schema.
	"asker": {Name: "asker", Description: "Asks before it answers.", Model: "scripted:asker", Tools: []string{"ask_user", "gate"}},
	"typed": {Name: "typed", Description: "Answers with a number.", Model: "scripted:typed",
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
}

// pricedModel is the one model the shared worker has a price for
// (testPrice): its requests carry a cost, every other model's are counted
// as unpriced (docs/contract.md §20.1). A test adds its script under the
// name "priced" (shared.book.Add(t, "priced", script)).
const pricedModel = "scripted:priced"

// limitedModel is the one model the shared worker holds to a rate limit
// (docs/contract.md §20.5): limitedPerMinute requests a minute, one at
// once. A test adds its script under the name "limited".
const (
	limitedModel     = "scripted:limited"
	limitedPerMinute = 6
)

// testPrice makes 1,000 prompt tokens cost a cent and an answer token a
// millionth of a dollar, so a small budget in dollars passes the
// estimate of a request (its max_tokens of answer) and a large prompt
// spends most of it.
var testPrice = keel.Price{Currency: "USD", Input: 10, Output: 1, Prices: "gateway test prices"}

// gates are channels tests close to let a blocked tool call finish.
type gates struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (g *gates) get(key string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch, ok := g.m[key]
	if !ok {
		ch = make(chan struct{})
		g.m[key] = ch
	}
	return ch
}

func (g *gates) open(key string) { close(g.get(key)) }

type gateArgs struct {
	Key string `json:"key"`
}

// testTools are the shared worker's tools: ask_user, and "gate", which
// waits until the test opens its gate (or the call is cancelled).
func testTools() *tool.Registry {
	gate := func(ctx context.Context, a gateArgs) (string, error) {
		select {
		case <-shared.gates.get(a.Key):
			return "gate " + a.Key + " opened", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	reg, err := tool.NewRegistry(tool.AskUser(), tool.New("gate", "Wait for the test to open a gate.", gate))
	if err != nil {
		panic(err)
	}
	return reg
}

// newClient is a keel client with its own Temporal and NATS connections,
// as a gateway in another process would have; liveBuffer 0 takes the
// default.
func newClient(t testing.TB, liveBuffer int) *client.Client {
	t.Helper()
	tc, err := shared.srv.Dial(context.Background(), sdkclient.Options{DataConverter: converter.GetDefaultDataConverter()})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(tc.Close)
	c, err := client.Dial(context.Background(), client.Options{Temporal: tc,
		Live:       keeltest.DialNATS(t, shared.nats.ClientURL(), live.NATSOptions{}),
		LiveBuffer: liveBuffer, DataConverter: converter.GetDefaultDataConverter()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// stack is a gateway served over HTTP by an httptest server.
type stack struct {
	gw  *gateway.Gateway
	srv *httptest.Server
	key string
}

// startGateway serves a new gateway over its own client.
func startGateway(t testing.TB, opts gateway.Options) *stack {
	t.Helper()
	return serveGateway(t, newClient(t, 0), opts)
}

func serveGateway(t testing.TB, c *client.Client, opts gateway.Options) *stack {
	t.Helper()
	if opts.Logger == nil {
		// Only the causes of 5xx answers, which no test expects.
		opts.Logger = errorLogger(t)
	}
	gw, err := gateway.New(c, opts)
	if err != nil {
		t.Fatalf("gateway: %v", err)
	}
	srv := httptest.NewServer(gw)
	s := &stack{gw: gw, srv: srv}
	switch {
	case len(opts.APIKeys) > 0:
		s.key = opts.APIKeys[0]
	case len(opts.Keys) > 0:
		s.key = opts.Keys[0].Key
	}
	t.Cleanup(s.stop)
	return s
}

// stop ends the gateway's streams and its HTTP server.
func (s *stack) stop() {
	s.gw.Close()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// model registers a script for the test and returns its model spec.
func model(t testing.TB, script string) string {
	return shared.book.Add(t, t.Name(), script)
}

// reply is a decoded JSON answer.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// code is an error reply's code.
func (r reply) code() string { s, _ := r.body["code"].(string); return s }

// call makes a request with the stack's key (if any) and decodes the
// JSON answer.
func (s *stack) call(t testing.TB, method, path string, body any) reply {
	t.Helper()
	return s.callWith(t, method, path, body, map[string]string{"Authorization": bearer(s.key)})
}

func bearer(key string) string {
	if key == "" {
		return ""
	}
	return "Bearer " + key
}

func (s *stack) callWith(t testing.TB, method, path string, body any, headers map[string]string) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(testCtx(t), method, s.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		switch {
		case v == "":
		case k == "Host":
			req.Host = v
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	out := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			t.Fatalf("%s %s: answer is not a JSON object: %v\n%s", method, path, err, raw)
		}
	}
	return out
}

// must checks the reply's status.
func (r reply) must(t testing.TB, status int) reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	return r
}

// send posts a prompt and returns the run's answer.
func (s *stack) send(t testing.TB, session string, body map[string]any) gateway.RunResponse {
	t.Helper()
	r := s.call(t, http.MethodPost, "/v1/sessions/"+session+"/runs", body).must(t, http.StatusAccepted)
	var out gateway.RunResponse
	if err := json.Unmarshal(r.raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// sseEvent is one event of a stream; comment holds a comment line's text.
type sseEvent struct {
	id, event, data, comment string
}

// envelope decodes the event's data.
func (e sseEvent) envelope(t testing.TB) keel.Envelope {
	t.Helper()
	var env keel.Envelope
	if err := json.Unmarshal([]byte(e.data), &env); err != nil {
		t.Fatalf("event data is not an envelope: %v: %s", err, e.data)
	}
	return env
}

// sseStream reads a response's events.
type sseStream struct {
	resp *http.Response
	rd   *bufio.Reader
}

// stream opens the session's event stream with extra headers.
func (s *stack) stream(t testing.TB, ctx context.Context, session, query string, headers map[string]string) *sseStream {
	t.Helper()
	return s.streamWith(t, ctx, s.srv.Client(), session, query, headers)
}

func (s *stack) streamWith(t testing.TB, ctx context.Context, hc *http.Client, session, query string, headers map[string]string) *sseStream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+"/v1/sessions/"+session+"/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if s.key != "" {
		req.Header.Set("Authorization", bearer(s.key))
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("open stream: %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	st := &sseStream{resp: resp, rd: bufio.NewReader(resp.Body)}
	t.Cleanup(st.close)
	return st
}

func (st *sseStream) close() { st.resp.Body.Close() }

// next reads the next event or comment; io.EOF when the stream ended.
func (st *sseStream) next() (sseEvent, error) {
	var ev sseEvent
	seen := false
	for {
		line, err := st.rd.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if seen {
				return ev, nil
			}
			continue
		}
		seen = true
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			ev.comment = value
		case "id":
			ev.id = value
		case "event":
			ev.event = value
		case "data":
			ev.data = value
		}
	}
}

// nextEvent skips comments and retry lines.
func (st *sseStream) nextEvent(t testing.TB) sseEvent {
	t.Helper()
	for {
		ev, err := st.next()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if ev.event != "" || ev.data != "" {
			return ev
		}
	}
}

// until reads events until one of type typ, and returns all read.
func (st *sseStream) until(t testing.TB, typ string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev := st.nextEvent(t)
		out = append(out, ev)
		if ev.event == typ {
			return out
		}
	}
}

// durableSeqs lists the ids of durable events, checking each against its
// envelope.
func durableSeqs(t testing.TB, evs []sseEvent) []int64 {
	t.Helper()
	var out []int64
	for _, ev := range evs {
		if ev.id == "" {
			continue
		}
		env := ev.envelope(t)
		if fmt.Sprint(env.Seq) != ev.id || env.Type != ev.event {
			t.Fatalf("event id %s / name %s disagree with its envelope (seq %d, type %s)", ev.id, ev.event, env.Seq, env.Type)
		}
		out = append(out, env.Seq)
	}
	return out
}

// contiguous checks seqs are from, from+1, ….
func contiguous(t testing.TB, seqs []int64, from int64) {
	t.Helper()
	for i, s := range seqs {
		if s != from+int64(i) {
			t.Fatalf("durable events skipped or repeated: %v (want from %d)", seqs, from)
		}
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// errorLogger writes only the causes of 5xx answers, which no test
// expects, to stderr.
func errorLogger(t testing.TB) *zap.Logger {
	l, err := logging.New(logging.Options{Level: zapcore.ErrorLevel})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// jsonLogger writes every record as JSON to w.
func jsonLogger(t testing.TB, w io.Writer) *zap.Logger {
	l, err := logging.New(logging.Options{Format: logging.FormatJSON, Level: zapcore.DebugLevel, Output: w})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
