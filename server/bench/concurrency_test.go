package bench_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/bench"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/tool"
)

// TestManyConcurrentSessions checks the quality bar "hundreds of concurrent
// sessions on 2 cores without errors": 200 sessions each send a prompt at
// once and run two steps (a model turn with a tool call, then an answer);
// every run must complete with its own dense log. Under -race (CI), whose
// instrumented Temporal server is several times slower, it runs 100.
//
//	go test -count=1 -run TestManyConcurrentSessions -v ./server/bench/
func TestManyConcurrentSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("long: hundreds of concurrent sessions on the embedded server")
	}
	sessions := 200
	if raceBuild {
		sessions = 50
	}
	srv := keeltest.StartServer(t, devserver.Config{})
	book := &keeltest.ScriptBook{}
	model := book.Add(t, "two-steps", `{"turns":[
	  {"text":["checking"],"tool_calls":[{"id":"c","name":"noop","arguments":{}}]},
	  {"text":["done"]}]}`)
	reg, err := tool.NewRegistry(bench.NoopTool())
	require.NoError(t, err)
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book, Tools: reg})
	c := keeltest.Client(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess := c.Session(fmt.Sprintf("many-%03d", i))
			run, err := sess.Send(ctx, "go", client.WithConfig(api.RunConfig{Model: model, Tools: []string{"noop"}}))
			if err != nil {
				errs <- fmt.Errorf("session %d: send: %w", i, err)
				return
			}
			out, err := run.Outcome(ctx)
			if err != nil || out.Status != keel.StatusCompleted || out.Text != "done" {
				errs <- fmt.Errorf("session %d: outcome %+v, %v", i, out, err)
				return
			}
			evs, err := sess.EventsAfter(ctx, 0)
			if err != nil {
				errs <- fmt.Errorf("session %d: events: %w", i, err)
				return
			}
			for j, ev := range evs {
				if ev.Seq != int64(j+1) {
					errs <- fmt.Errorf("session %d: event %d has seq %d", i, j, ev.Seq)
					return
				}
			}
			if !evs[len(evs)-1].Terminal() {
				errs <- fmt.Errorf("session %d: log ends with %s", i, evs[len(evs)-1].Type)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d sessions, %d runs of 2 steps each, all completed in %v", sessions, sessions, time.Since(start).Round(time.Millisecond))
}

// MeasureConcurrency measures, besides keel through its Go client and the
// bare start, the update-with-start baseline and keel driven by a foreign
// client, each with a run that completes and one cancelled mid-stream,
// and each the way it claims to: the baseline's calls are
// update-with-starts whose update the workflow accepted, and the foreign
// client sends and waits with updates, never reading a history as keel's
// client does.
func TestConcurrencyUpdateWithStartAndForeignClient(t *testing.T) {
	if testing.Short() {
		t.Skip("long: four phases of streaming runs on the embedded server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := bench.MeasureConcurrency(ctx, bench.ConcurrencyOptions{Sessions: []int{2}, CancelFraction: 0.5, Foreign: true})
	require.NoError(t, err)
	p := rep.Points[0]
	require.NotNil(t, p.Foreign, "the foreign client's phase")
	for name, f := range map[string]bench.PhaseFigures{"baseline": p.Baseline, "update-with-start baseline": p.BaselineUWS,
		"keel": p.Keel, "foreign client": *p.Foreign} {
		if f.Completed != 1 || f.Cancelled != 1 || f.Failed != 0 {
			t.Errorf("%s: %d completed, %d cancelled, %d failed (%v); want 1, 1, 0", name, f.Completed, f.Cancelled, f.Failed, f.Errors)
		}
		if len(f.Starts) != 2 || slices.Min(f.Starts) <= 0 || len(f.Cancels) != 1 || f.Cancels[0] <= 0 {
			t.Errorf("%s: starts %v, cancels %v", name, f.Starts, f.Cancels)
		}
		// A run streams its whole model time.
		if len(f.Runs) != 1 || f.Runs[0] < bench.ModelTime() {
			t.Errorf("%s: runs %v, want one of at least %v", name, f.Runs, bench.ModelTime())
		}
		if f.History.Runs != 1 || f.StreamTurns == 0 || f.Server.Actions.Total() == 0 {
			t.Errorf("%s: %d histories read, %d streaming turns, %d billable actions", name, f.History.Runs, f.StreamTurns, f.Server.Actions.Total())
		}
	}
	accepted := enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED.String()
	uws := p.BaselineUWS
	if uws.ClientRPCs["ExecuteMultiOperation"] != 2 || uws.ClientRPCs["StartWorkflowExecution"] != 0 || uws.History.Events[accepted] != 1 {
		t.Errorf("update-with-start baseline: client calls %v, %d updates accepted in the completed run", uws.ClientRPCs, uws.History.Events[accepted])
	}
	fc := p.Foreign.ClientRPCs
	if fc["ExecuteMultiOperation"] != 2 || fc["UpdateWorkflowExecution"] < 2 || fc["SignalWorkflowExecution"] != 1 ||
		fc["GetWorkflowExecutionHistory"] != 0 || fc["QueryWorkflow"] != 0 {
		t.Errorf("foreign client's calls %v: want 2 update-with-starts, an outcome update a run, one cancel, no history read, no query", fc)
	}
	if p.Keel.ClientRPCs["GetWorkflowExecutionHistory"] == 0 {
		t.Errorf("keel's Go client's calls %v: no history followed", p.Keel.ClientRPCs)
	}

	r50, r99, send := p.ForeignRatios()
	if p.SendRatio() <= 0 || r50 <= 0 || r99 <= 0 || send <= 0 {
		t.Errorf("ratios: send %v; foreign run %v / %v, send %v", p.SendRatio(), r50, r99, send)
	}
	sum := rep.Summary().Points[0]
	if sum.Foreign == nil || sum.Foreign.Completed != 1 || sum.BaselineUWS.Completed != 1 || sum.SendOverBareUWS != p.SendRatio() ||
		sum.ForeignRunRatio != [2]float64{r50, r99} || sum.ForeignSendOverBareUWS != send {
		t.Errorf("summary: %+v", sum)
	}
	for _, tg := range bench.ConcurrencyTargets() {
		if strings.Contains(tg.Text, "send p99 ≤ 1.5× bare update-with-start") {
			if v, _ := rep.Verdict(tg); v == bench.NotMeasured {
				t.Errorf("%q was not judged", tg.Text)
			}
		}
	}
}

// The targets judge keel's Go client against the bare start and a foreign
// client against the bare update-with-start, run p50 at 500 and (looser)
// at 1,000 sessions, sends at every N; a path not measured is not judged.
func TestConcurrencyTargetsJudgeEachClientPath(t *testing.T) {
	side := func(n int, run, send time.Duration) *bench.PhaseFigures {
		f := &bench.PhaseFigures{Completed: n}
		for range n {
			f.Runs, f.Starts = append(f.Runs, run), append(f.Starts, send)
		}
		return f
	}
	const s = time.Second
	point := func(n int, keelRun, foreignRun, foreignSend time.Duration) bench.ConcurrencyPoint {
		p := bench.ConcurrencyPoint{Sessions: n, Baseline: *side(n, 10*s, s/10), BaselineUWS: *side(n, 20*s, s),
			Keel: *side(n, keelRun, 1400*time.Millisecond)}
		if foreignRun > 0 {
			p.Foreign = side(n, foreignRun, foreignSend)
		}
		return p
	}
	rep := &bench.ConcurrencyReport{Points: []bench.ConcurrencyPoint{
		point(500, 12*s, 26*s, 1400*time.Millisecond),
		point(1000, 12900*time.Millisecond, 0, 0),
	}}
	want := map[string]string{
		"every run completes at 1000":                                     bench.Pass,
		"run p50 ≤ 1.25× bare at 500":                                     bench.Pass,
		"run p50 ≤ 1.3× bare at 1000":                                     bench.Pass,
		"run p99 ≤ 1.5× bare at 1000":                                     bench.Pass,
		"send p99 ≤ 1.5× bare update-with-start p99 at 0":                 bench.Pass,
		"foreign client: every run completes at 1000":                     bench.NotMeasured,
		"foreign client: run p50 ≤ 1.25× bare update-with-start at 500":   bench.Fail,
		"foreign client: run p99 ≤ 1.5× bare update-with-start at 500":    bench.Pass,
		"foreign client: run p50 ≤ 1.3× bare update-with-start at 1000":   bench.NotMeasured,
		"foreign client: send p99 ≤ 1.5× bare update-with-start p99 at 0": bench.Pass,
	}
	got := map[string]string{}
	for _, tg := range bench.ConcurrencyTargets() {
		v, _ := rep.Verdict(tg)
		got[fmt.Sprintf("%s at %d", tg.Text, tg.Sessions)] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	// Sends over 1.5× the bare update-with-start's fail, at any N.
	rep.Points[1].Keel.Starts = bench.Latencies{2 * s}
	for _, tg := range bench.ConcurrencyTargets() {
		if tg.Text == "send p99 ≤ 1.5× bare update-with-start p99" {
			if v, detail := rep.Verdict(tg); v != bench.Fail || !strings.Contains(detail, "1000: 2.00× (2.00 s vs 1.00 s)") {
				t.Errorf("keel's sends at 2× the bare update-with-start's at 1000: %s, %s", v, detail)
			}
		}
	}
}
