package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/hook"
	kstack "github.com/keelrun/keel/server/internal/stack"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// What event sinks cost (docs/contract.md §23.6, docs/performance.md
// "Event sinks"): many sessions run one short run each at once, on a
// worker without sinks (the baseline) and on one with a sink in the same
// process; how late each event reaches the sink (from its at, the
// workflow's clock, to the sink's Deliver), and what the deliveries add
// to the runs' times, their billable actions and their histories.

// sinkRunScript is a short run: a turn that calls a tool the run lacks
// (answered by the workflow, no activity), then the answer.
const sinkRunScript = `{"repeat":true,"turns":[
  {"text":["Looking."],"tool_calls":[{"id":"a","name":"missing","arguments":{}}]},
  {"text":["done"]}]}`

// The sessions' IDs: sinks-ROUND-SHAPE-N, and a warm-up's.
const (
	sinkShape = "-sink-"
	warmUp    = "warm"
)

// SinkOptions configures MeasureSinks.
type SinkOptions struct {
	// Sessions is how many sessions run at once, each one run. At least 1.
	Sessions int
	// Rounds is how many times both shapes run, alternating, baseline
	// first. At least 1.
	Rounds int
	// Progress, when set, is told what is being measured.
	Progress func(string)
}

// SinkReport is what MeasureSinks measured.
type SinkReport struct {
	Sessions, Rounds int
	// Baseline and Sinks are the runs' times, send to outcome, without
	// and with a sink.
	Baseline, Sinks Latencies
	// Lag is every event's first delivery, from its at to the sink;
	// Terminal that of the runs' terminal events alone, which the
	// execution after the run's delivers.
	Lag, Terminal Latencies
	// Delivered counts the events the sink took, Repeats those it had
	// already.
	Delivered, Repeats int
	// BaselineActions and SinkActions are billable actions per run (the
	// server's action counter), their executions after them included.
	BaselineActions, SinkActions float64
	// BaselineHistory and SinkHistory are the run's execution's history,
	// mean bytes and events.
	BaselineHistory, SinkHistory HistorySize
	Load                         string
}

// HistorySize is a mean history's size.
type HistorySize struct {
	Bytes, Events float64
}

// sinkClock is an in-process sink: it notes each event's lag as it
// arrives and lets the measurement wait for a session's last event.
type sinkClock struct {
	mu        sync.Mutex
	high      map[string]int64
	lag       Latencies
	terminal  Latencies
	delivered int
	repeats   int
	changed   chan struct{}
}

var _ hook.Sink = (*sinkClock)(nil)

func newSinkClock() *sinkClock {
	return &sinkClock{high: map[string]int64{}, changed: make(chan struct{})}
}

func (s *sinkClock) Deliver(_ context.Context, sessionID string, events []keel.Envelope) error {
	now := time.Now()
	// Only the measured sessions count: a session of the baseline, or a
	// warm-up, whose next execution a worker with the sink took delivers
	// its whole log then, late.
	measured := strings.Contains(sessionID, sinkShape) && !strings.HasSuffix(sessionID, warmUp)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range events {
		if ev.Seq <= s.high[sessionID] {
			if measured {
				s.delivered++
				s.repeats++
			}
			continue
		}
		s.high[sessionID] = ev.Seq
		if !measured {
			continue
		}
		s.delivered++
		s.lag = append(s.lag, now.Sub(ev.At))
		if ev.Terminal() {
			s.terminal = append(s.terminal, now.Sub(ev.At))
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// waitFor blocks until the sink has each session's log up to its seq.
func (s *sinkClock) waitFor(ctx context.Context, last map[string]int64) error {
	for {
		s.mu.Lock()
		missing := ""
		for id, seq := range last {
			if s.high[id] < seq {
				missing = id
				break
			}
		}
		changed := s.changed
		s.mu.Unlock()
		if missing == "" {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("bench: the sink never got all of %s: %w", missing, ctx.Err())
		}
	}
}

// MeasureSinks starts an in-memory server tuned as keel dev's with the
// server's counters, and in each round a keel worker without sinks, then
// one with a sink, each in this process with a content store in memory,
// and measures opts.Sessions runs at once on each.
func MeasureSinks(ctx context.Context, opts SinkOptions) (*SinkReport, error) {
	if opts.Sessions < 1 || opts.Rounds < 1 {
		return nil, fmt.Errorf("bench: sessions and rounds must be at least 1")
	}
	say := func(format string, a ...any) {
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf(format, a...))
		}
	}
	counters := &ServerCounters{}
	srv, err := startCounted(ctx, counters)
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	sc, err := scripted.Parse([]byte(sinkRunScript))
	if err != nil {
		return nil, err
	}
	lib := &scripted.Library{}
	if err := lib.Add("short", sc); err != nil {
		return nil, err
	}
	models := worker.DefaultModels()
	models.Scripts = lib
	noTools, err := tool.NewRegistry()
	if err != nil {
		return nil, err
	}

	rep := &SinkReport{Sessions: opts.Sessions, Rounds: opts.Rounds, Load: loadAverage()}
	sink := newSinkClock()
	var baseHist, sinkHist []HistorySize
	var baseActions, sinkActions int64
	for round := range opts.Rounds {
		for _, withSink := range []bool{false, true} {
			shape := map[bool]string{false: "-baseline-", true: sinkShape}[withSink]
			say("round %d: %d sessions at once, %s", round+1, opts.Sessions, shape)
			wopts := &worker.Options{Logger: zap.NewNop(), Models: models, Tools: noTools}
			if withSink {
				wopts.Sinks = map[string]hook.Sink{"bench": sink}
			}
			st, err := kstack.Build(ctx, kstack.Config{Server: srv, Store: kstack.StoreConfig{URL: "mem://"}, Worker: wopts})
			if err != nil {
				return nil, err
			}
			prefix := fmt.Sprintf("sinks-%d%s", round, shape)
			times, last, hist, actions, err := sinkRound(ctx, st, counters, prefix, opts.Sessions)
			if err == nil && withSink {
				err = sink.waitFor(ctx, last)
			}
			_ = st.Stop()
			if err != nil {
				return nil, err
			}
			if withSink {
				rep.Sinks, sinkHist, sinkActions = append(rep.Sinks, times...), append(sinkHist, hist...), sinkActions+actions
			} else {
				rep.Baseline, baseHist, baseActions = append(rep.Baseline, times...), append(baseHist, hist...), baseActions+actions
			}
		}
	}
	runs := opts.Sessions * opts.Rounds
	rep.BaselineActions, rep.SinkActions = float64(baseActions)/float64(runs), float64(sinkActions)/float64(runs)
	rep.BaselineHistory = meanHistory(baseHist)
	rep.SinkHistory = meanHistory(sinkHist)
	sink.mu.Lock()
	rep.Lag, rep.Terminal, rep.Delivered, rep.Repeats = sink.lag, sink.terminal, sink.delivered, sink.repeats
	sink.mu.Unlock()
	return rep, nil
}

// sinkRound runs n sessions at once on st's worker, one short run each,
// and returns the runs' times, each session's last sequence, the size of
// each run's execution's history, and the
// billable actions the runs took.
func sinkRound(ctx context.Context, st *kstack.Stack, counters *ServerCounters, prefix string, n int) (
	Latencies, map[string]int64, []HistorySize, int64, error) {
	kc, err := client.Dial(ctx, client.Options{Temporal: st.Temporal})
	if err != nil {
		return nil, nil, nil, 0, err
	}
	defer kc.Close()
	if _, err := shortRun(ctx, kc, prefix+warmUp); err != nil {
		return nil, nil, nil, 0, err
	}
	if err := settle(ctx, counters); err != nil {
		return nil, nil, nil, 0, err
	}
	before := counters.Snapshot()
	times := make(Latencies, n)
	seqs := make([]int64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			t0 := time.Now()
			seqs[i], errs[i] = shortRun(ctx, kc, fmt.Sprintf("%s%d", prefix, i))
			times[i] = time.Since(t0)
		})
	}
	wg.Wait()
	last := map[string]int64{}
	for i, err := range errs {
		if err != nil {
			return nil, nil, nil, 0, err
		}
		last[fmt.Sprintf("%s%d", prefix, i)] = seqs[i]
	}
	// The executions after the runs (their first task, their deliveries)
	// count too.
	if err := settle(ctx, counters); err != nil {
		return nil, nil, nil, 0, err
	}
	actions := counters.Snapshot().Sub(before).Actions.Total()
	var hist []HistorySize
	for id := range last {
		h, err := firstExecutionSize(ctx, st.Temporal, id)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		if hist = append(hist, h); len(hist) == 20 { // plenty for a mean
			break
		}
	}
	return times, last, hist, actions, nil
}

// shortRun sends the short run to a new session, waits for its outcome
// and returns its terminal event's sequence, the session's last.
func shortRun(ctx context.Context, kc *client.Client, session string) (int64, error) {
	run, err := kc.Session(session).Send(ctx, "go", client.WithConfig(api.RunConfig{Model: "scripted:short"}))
	if err != nil {
		return 0, err
	}
	out, err := run.Outcome(ctx)
	if err != nil {
		return 0, err
	}
	if out.Text != "done" {
		return 0, fmt.Errorf("bench: %s answered %q", session, out.Text)
	}
	return out.Seq, nil
}

// firstExecutionSize measures a session's first execution's history.
func firstExecutionSize(ctx context.Context, tc sdkclient.Client, id string) (HistorySize, error) {
	desc, err := tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return HistorySize{}, err
	}
	var h HistorySize
	it := tc.GetWorkflowHistory(ctx, id, desc.GetWorkflowExecutionInfo().GetFirstRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return HistorySize{}, err
		}
		h.Bytes += float64(proto.Size(ev))
		h.Events++
	}
	return h, nil
}

// meanHistory is the samples' mean history.
func meanHistory(samples []HistorySize) HistorySize {
	if len(samples) == 0 {
		return HistorySize{}
	}
	var sum HistorySize
	for _, h := range samples {
		sum.Bytes += h.Bytes
		sum.Events += h.Events
	}
	n := float64(len(samples))
	return HistorySize{Bytes: sum.Bytes / n, Events: sum.Events / n}
}

// Print writes the report as a table with the ratios against the
// baseline.
func (r *SinkReport) Print(w io.Writer) {
	fmt.Fprintf(w, "event sinks: %d sessions at once, one short run each, %d round(s) (load %s)\n\n", r.Sessions, r.Rounds, r.Load)
	fmt.Fprintf(w, "%-36s %10s %10s %12s\n", "", "p50", "p99", "actions/run")
	fmt.Fprintf(w, "%-36s %10s %10s %12.1f\n", "run time, no sink (baseline)", ms(r.Baseline.P50()), ms(r.Baseline.P99()), r.BaselineActions)
	fmt.Fprintf(w, "%-36s %10s %10s %12.1f\n", "run time, one sink", ms(r.Sinks.P50()), ms(r.Sinks.P99()), r.SinkActions)
	fmt.Fprintf(w, "%-36s %9.2fx %9.2fx %+12.1f\n\n", "with a sink / baseline", ratio(r.Sinks.P50(), r.Baseline.P50()),
		ratio(r.Sinks.P99(), r.Baseline.P99()), r.SinkActions-r.BaselineActions)
	fmt.Fprintf(w, "%-36s %10s %10s\n", "sink lag (event's at → Deliver)", "p50", "p99")
	fmt.Fprintf(w, "%-36s %10s %10s\n", fmt.Sprintf("every event (%d)", len(r.Lag)), ms(r.Lag.P50()), ms(r.Lag.P99()))
	fmt.Fprintf(w, "%-36s %10s %10s\n\n", fmt.Sprintf("terminal events (%d)", len(r.Terminal)), ms(r.Terminal.P50()), ms(r.Terminal.P99()))
	fmt.Fprintf(w, "delivered %d events, %d of them again (at least once)\n", r.Delivered, r.Repeats)
	fmt.Fprintf(w, "the run's execution's history: %.0f bytes, %.1f events without a sink; %.0f bytes, %.1f events with one (%+.0f bytes)\n",
		r.BaselineHistory.Bytes, r.BaselineHistory.Events, r.SinkHistory.Bytes, r.SinkHistory.Events, r.SinkHistory.Bytes-r.BaselineHistory.Bytes)
}
