package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// shared is one embedded server and worker for the package's tests; each
// test uses its own sessions and scripts.
var shared struct {
	srv   *devserver.Server
	tc    sdkclient.Client
	live  *live.Memory
	book  keeltest.ScriptBook
	gates gates
	calls sync.Map // tool call key → *int32 executions
}

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	srv, err := devserver.Start(ctx, devserver.Config{Port: devserver.AnyPort, DisableUI: true})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start server:", err)
		os.Exit(1)
	}
	shared.srv, shared.live = srv, live.NewMemory()
	shared.gates.m = map[string]chan struct{}{}
	tc, err := srv.Dial(context.Background(), sdkclient.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(1)
	}
	shared.tc = tc
	w, err := worker.New(tc, worker.Options{Models: &shared.book, Tools: controlTools(), Live: shared.live,
		StopTimeout: time.Second, Agents: testAgents})
	if err == nil {
		err = w.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	code := m.Run()
	w.Stop()
	tc.Close()
	_ = srv.Stop()
	os.Exit(code)
}

// newClient returns a keel client of the shared server with its own
// Temporal connection, as a separate process would have.
func newClient(t *testing.T) *client.Client {
	return keeltest.Client(t, shared.srv, shared.live)
}

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

type confirmArgs struct {
	Prompt string `json:"prompt"`
}

// controlTools are the tools of the shared worker.
func controlTools() *tool.Registry {
	gate := func(ctx context.Context, a gateArgs) (string, error) {
		select {
		case <-shared.gates.get(a.Key):
			return "gate " + a.Key + " opened", nil
		case <-ctx.Done():
			shared.gates.open(a.Key + "/cancelled")
			return "", ctx.Err()
		}
	}
	confirm := func(ctx context.Context, a confirmArgs) (string, error) {
		info := tool.Info(ctx)
		n, _ := shared.calls.LoadOrStore(info.RunID+"/"+info.ToolCallID, new(int))
		shared.gates.mu.Lock()
		*n.(*int)++
		shared.gates.mu.Unlock()
		ans, err := tool.Ask(ctx, tool.Question{ID: "ok", Prompt: a.Prompt, Schema: json.RawMessage(`{"type":"boolean"}`)})
		if err != nil {
			return "", err
		}
		return "confirmed: " + string(ans), nil
	}
	reg, err := tool.NewRegistry(
		tool.Sleep(), tool.AskUser(),
		tool.New("gate", "Wait for the test to open a gate.", gate),
		tool.New("bg", "Wait for a gate, detached.", gate, tool.Detached()),
		tool.New("confirm", "Ask the host to confirm.", confirm),
		tool.New("echo", "Echo.", func(ctx context.Context, a confirmArgs) (string, error) { return "echo " + a.Prompt, nil }),
	)
	if err != nil {
		panic(err)
	}
	return reg
}

// gateCancelled is closed when a gate's call saw its context cancelled.
func gateCancelled(key string) <-chan struct{} { return shared.gates.get(key + "/cancelled") }

// executions returns how many times a tool call ran.
func executions(runID, callID string) int {
	n, ok := shared.calls.Load(runID + "/" + callID)
	if !ok {
		return 0
	}
	shared.gates.mu.Lock()
	defer shared.gates.mu.Unlock()
	return *n.(*int)
}

// cfg is a run config with a named script and tools.
func cfg(t *testing.T, script string, tools ...string) client.SendOption {
	return client.WithConfig(api.RunConfig{Model: shared.book.Add(t, t.Name(), script), Tools: tools})
}

// waitFor follows the run until an event of type typ and returns it.
func waitFor(t *testing.T, ctx context.Context, run *client.Run, typ string) keel.Envelope {
	t.Helper()
	for ev, err := range run.Events(ctx) {
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		if ev.Type == typ {
			return ev
		}
	}
	t.Fatalf("run ended without %s", typ)
	return keel.Envelope{}
}

// logOf returns the session's whole durable log, checking it is dense.
func logOf(t *testing.T, ctx context.Context, s *client.Session) []keel.Envelope {
	t.Helper()
	evs, err := s.EventsAfter(ctx, 0)
	if err != nil {
		t.Fatalf("events after: %v", err)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
	}
	return evs
}

// typesOf lists event types, optionally only those of one run.
func typesOf(evs []keel.Envelope, runID string) []string {
	var out []string
	for _, ev := range evs {
		if runID == "" || ev.RunID == runID {
			out = append(out, ev.Type)
		}
	}
	return out
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}
