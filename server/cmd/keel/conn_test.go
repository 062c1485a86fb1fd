package main

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// otlpCollector is an OTLP/HTTP trace collector that keeps the spans it
// receives.
type otlpCollector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	// got is signalled after each export request.
	got chan struct{}
}

// startOTLPCollector serves a collector until the test's cleanups reach
// it: after those registered later (a worker's, whose last spans it
// receives).
func startOTLPCollector(t *testing.T) (*otlpCollector, string) {
	c := &otlpCollector{got: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				c.spans = append(c.spans, ss.GetSpans()...)
			}
		}
		c.mu.Unlock()
		select {
		case c.got <- struct{}{}:
		default:
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

// traceOf returns the trace ID of the first span named name, "" if none
// arrived.
func (c *otlpCollector) traceOf(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.spans {
		if s.GetName() == name {
			return hex.EncodeToString(s.GetTraceId())
		}
	}
	return ""
}

// names returns the names of the spans of trace that arrived.
func (c *otlpCollector) names(trace string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.spans {
		if hex.EncodeToString(s.GetTraceId()) == trace {
			out = append(out, s.GetName())
		}
	}
	return out
}

// missing returns those of names with no span in trace.
func (c *otlpCollector) missing(trace string, names ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	have := map[string]bool{}
	for _, s := range c.spans {
		if hex.EncodeToString(s.GetTraceId()) == trace {
			have[s.GetName()] = true
		}
	}
	var out []string
	for _, n := range names {
		if !have[n] {
			out = append(out, n)
		}
	}
	return out
}

// clearOTELEnv unsets the OpenTelemetry variables, for the duration of
// the test: unset, not empty, which the embedded server refuses.
func clearOTELEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "OTEL_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
}

// TestRunTraced: with the OTLP variables set, `keel run` traces its send,
// exports the span before it exits, and the worker's spans of the session
// and its run join that trace; without them the CLI's client is not traced.
func TestRunTraced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	clearTemporalEnv(t)
	clearOTELEnv(t)
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	collector, endpoint := startOTLPCollector(t)
	srv := keeltest.StartServer(t, devserver.Config{})

	t.Run("untraced without the variables", func(t *testing.T) {
		var cf connFlags
		fs := newFlagSet("state", "keel state", "")
		cf.register(fs, false)
		if err := fs.Parse([]string{"--address", srv.Address()}); err != nil {
			t.Fatal(err)
		}
		kc, err := cf.dial(ctx, io.Discard, api.RunConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer kc.close()
		if kc.tel != nil {
			t.Fatal("the client is traced without OTEL_EXPORTER_OTLP_ENDPOINT")
		}
	})

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	// The worker exports its spans within 50 ms of their end, not at exit.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	addr := []string{"--address", srv.Address()}
	startKeelWorker(t, ctx, addr...)
	code, out, errOut := keelCmd(ctx, append(append([]string{"run", "--nats", "", "--model", writeScript(t, connScript),
		"--session", "traced"}, addr...), "hello")...)
	if code != exitOK || !strings.Contains(out, "Reached you.") {
		t.Fatalf("status %d, want 0 and the run's text\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// keel run has exported its span by the time it returns.
	trace := collector.traceOf("UpdateWithStartWorkflow:send")
	if trace == "" {
		t.Fatalf("no UpdateWithStartWorkflow:send span at the collector after keel run returned; stderr:\n%s", errOut)
	}
	// The run executes in the session's workflow (an inline session, no
	// Run workflow): the session's start (update-with-start), its handling
	// of the send and the run's model turn are in the trace.
	want := []string{"HandleUpdate:send", "RunWorkflow:Session", "RunActivity:ModelTurn"}
	for {
		missing := collector.missing(trace, want...)
		if len(missing) == 0 {
			break
		}
		select {
		case <-collector.got:
		case <-ctx.Done():
			t.Fatalf("the worker's spans %v never joined keel run's trace %s (it has %q)", missing, trace, collector.names(trace))
		}
	}
}
