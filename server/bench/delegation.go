package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/delegation"
	"github.com/keelrun/keel/live"
	kstack "github.com/keelrun/keel/server/internal/stack"
	"github.com/keelrun/keel/server/natsserver"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/worker"
)

// What a delegation costs (docs/contract.md §21, docs/performance.md
// "Delegation"): the same three model turns run once in one session
// ("inline": two turns that call a tool the run lacks, which the workflow
// answers itself, then the answer) and once across a parent and its child
// ("delegated": the parent's turn that delegates, the child's one turn,
// the parent's answer); and how late a child's delta reaches a subscriber
// of its parent, against one of the child itself, both across NATS.

// Scripts of the delegation measurement.
const (
	inlineScript = `{"repeat":true,"turns":[
	  {"tool_calls":[{"id":"a","name":"missing","arguments":{}}]},
	  {"tool_calls":[{"id":"b","name":"missing","arguments":{}}]},
	  {"text":["done"]}]}`
	parentScript = `{"repeat":true,"turns":[
	  {"tool_calls":[{"id":"d","name":"agent__child","arguments":{"task":"answer"}}]},
	  {"text":["done"]}]}`
	childScript = `{"repeat":true,"turns":[{"text":["child done"]}]}`
	// relayScript delegates to the streaming child, whose deltas the
	// latency follows.
	relayScript = `{"repeat":true,"turns":[
	  {"tool_calls":[{"id":"d","name":"agent__streamer","arguments":{"task":"stream"}}]},
	  {"text":["done"]}]}`
)

// streamingChildScript streams n deltas, one every gap, after a first
// turn that pauses: the child's ID is drawn by its parent
// (delegation.ChildSessionID), so its subscriber learns it from the parent's
// agent.started, as any reader does, and subscribes in that pause.
func streamingChildScript(n int, gap time.Duration) string {
	chunks := make([]string, n)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("%q", fmt.Sprintf("d%d ", i))
	}
	return fmt.Sprintf(`{"repeat":true,"chunk_delay":%q,"turns":[
	  {"chunk_delay":"300ms","tool_calls":[{"id":"w","name":"missing","arguments":{}}]},
	  {"text":[%s]}]}`, gap.String(), strings.Join(chunks, ","))
}

// DelegationOptions configures MeasureDelegation.
type DelegationOptions struct {
	// Runs is how many runs of each shape are measured (after one of
	// each to warm up). At least 1.
	Runs int
	// Deltas is how many deltas the streaming child sends a run, for the
	// delta latency. At least 1.
	Deltas int
	// Progress, when set, is told what is being measured.
	Progress func(string)
}

// DelegationReport is what MeasureDelegation measured.
type DelegationReport struct {
	Runs int
	// Inline and Delegated are each shape's run times (send to
	// outcome), and billable actions per run (the server's action
	// counter), in all and by type over all runs.
	Inline, Delegated             Latencies
	InlineActions, DelegActions   float64
	InlineByType, DelegatedByType Counts
	// ToParent and ToChild are the times from a child's delta being
	// sealed to its arrival at a subscriber of the parent (relayed) and
	// of the child (direct).
	ToParent, ToChild Latencies
	Load              string
}

// MeasureDelegation starts an in-memory server tuned as keel dev's with
// the server's counters, an embedded NATS server and a keel worker in
// this process whose agents are "solo" (the inline shape), "parent" and
// its "child", and measures.
func MeasureDelegation(ctx context.Context, opts DelegationOptions) (*DelegationReport, error) {
	if opts.Runs < 1 || opts.Deltas < 1 {
		return nil, fmt.Errorf("bench: runs and deltas must be at least 1")
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
	ns, err := natsserver.Start(natsserver.Options{Port: natsserver.RandomPort})
	if err != nil {
		return nil, fmt.Errorf("bench: start NATS: %w", err)
	}
	defer ns.Shutdown()

	lib := &scripted.Library{}
	for name, text := range map[string]string{"solo": inlineScript, "parent": parentScript, "child": childScript,
		"streamer": streamingChildScript(opts.Deltas, 5*time.Millisecond), "relay": relayScript} {
		sc, err := scripted.Parse([]byte(text))
		if err != nil {
			return nil, err
		}
		if err := lib.Add(name, sc); err != nil {
			return nil, err
		}
	}
	models := worker.DefaultModels()
	models.Scripts = lib
	agents := map[string]delegation.AgentSpec{
		"solo":   {Name: "solo", Model: "scripted:solo", Tools: []string{"missing"}},
		"parent": {Name: "parent", Model: "scripted:parent", Tools: []string{"agent__child"}, Agents: []string{"child"}},
		"child":  {Name: "child", Model: "scripted:child"},
		// relay delegates to streamer, whose deltas the latency follows.
		"relay":    {Name: "relay", Model: "scripted:relay", Tools: []string{"agent__streamer"}, Agents: []string{"streamer"}},
		"streamer": {Name: "streamer", Model: "scripted:streamer"},
	}
	workspace, err := os.MkdirTemp("", "keel-bench-delegation-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(workspace)
	st, err := kstack.Build(ctx, kstack.Config{Server: srv, NATS: ns.ClientURL(),
		Worker: &worker.Options{Logger: zap.NewNop(), Models: models, Agents: agents, Workspace: workspace}})
	if err != nil {
		return nil, err
	}
	defer func() { _ = st.Stop() }()
	tc, err := srv.Dial(ctx, sdkclient.Options{})
	if err != nil {
		return nil, err
	}
	defer tc.Close()
	sub, err := live.DialNATS(ns.ClientURL(), live.NATSOptions{})
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	kc, err := client.Dial(ctx, client.Options{Temporal: tc})
	if err != nil {
		return nil, err
	}
	defer kc.Close()

	rep := &DelegationReport{Runs: opts.Runs, Load: loadAverage()}
	shapes := []struct {
		agent   string
		fig     *Latencies
		actions *float64
		byType  *Counts
	}{
		{"solo", &rep.Inline, &rep.InlineActions, &rep.InlineByType},
		{"parent", &rep.Delegated, &rep.DelegActions, &rep.DelegatedByType},
	}
	for _, sh := range shapes {
		say("%d runs as %s", opts.Runs, sh.agent)
		if _, err := timedRun(ctx, kc, "warm-"+sh.agent, sh.agent); err != nil {
			return nil, err
		}
		before := counters.Snapshot()
		var lat Latencies
		for i := range opts.Runs {
			d, err := timedRun(ctx, kc, fmt.Sprintf("%s-%d", sh.agent, i), sh.agent)
			if err != nil {
				return nil, err
			}
			lat = append(lat, d)
		}
		// The last actions of the runs (their continue-as-new, the
		// child's completion) land as the outcome is read: let the
		// server's counters settle on them.
		if err := settle(ctx, counters); err != nil {
			return nil, err
		}
		diff := counters.Snapshot().Sub(before)
		*sh.fig = lat
		*sh.actions = float64(diff.Actions.Total()) / float64(opts.Runs)
		*sh.byType = diff.Actions
	}

	say("%d runs relaying %d deltas each", opts.Runs, opts.Deltas)
	for i := range opts.Runs {
		toParent, toChild, err := relayedDeltas(ctx, kc, sub, fmt.Sprintf("relay-%d", i), opts.Deltas)
		if err != nil {
			return nil, err
		}
		rep.ToParent = append(rep.ToParent, toParent...)
		rep.ToChild = append(rep.ToChild, toChild...)
	}
	return rep, nil
}

// timedRun sends a prompt to a new session as agent and waits for its
// outcome, returning how long that took.
func timedRun(ctx context.Context, kc *client.Client, session, agent string) (time.Duration, error) {
	t0 := time.Now()
	run, err := kc.Session(session).Send(ctx, "go", client.WithConfig(api.RunConfig{Agent: agent}))
	if err != nil {
		return 0, err
	}
	out, err := run.Outcome(ctx)
	if err != nil {
		return 0, fmt.Errorf("run as %s: %w", agent, err)
	}
	if out.Text != "done" {
		return 0, fmt.Errorf("run as %s answered %q", agent, out.Text)
	}
	return time.Since(t0), nil
}

// settle waits until the server's action counter stops moving for a
// while, so that what the measured runs caused is all counted.
func settle(ctx context.Context, counters *ServerCounters) error {
	last := counters.Snapshot().Actions.Total()
	for quiet := 0; quiet < 5; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if n := counters.Snapshot().Actions.Total(); n != last {
			last, quiet = n, 0
			continue
		}
		quiet++
	}
	return nil
}

// relayedDeltas runs relay in session, following the parent's live
// stream from before the run and the child's from its start, and returns
// each delta's latency at both: from its seal (keel.Envelope.At, the
// worker's clock, this process's) to its arrival.
func relayedDeltas(ctx context.Context, kc *client.Client, ch live.Channel, session string, n int) (toParent, toChild Latencies, err error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := make([]error, 2)
	collect := func(i int, s live.Subscription, relayed bool, into *Latencies) {
		defer wg.Done()
		for got := 0; got < n; {
			env, err := s.Next(ctx)
			now := time.Now()
			if err != nil {
				var lag *live.LaggedError
				if errors.As(err, &lag) {
					errs[i] = fmt.Errorf("subscriber lagged by %d", lag.Missed)
				} else {
					errs[i] = err
				}
				return
			}
			if env.Type != keel.TypeTextDelta || (env.Path != "") != relayed {
				continue
			}
			got++
			mu.Lock()
			*into = append(*into, now.Sub(env.At))
			mu.Unlock()
		}
	}
	follow := func(id string, relayed bool, into *Latencies, i int) (func() error, error) {
		s, err := ch.Subscribe(ctx, id, live.SubscribeOptions{Buffer: 4 * n})
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go collect(i, s, relayed, into)
		return s.Close, nil
	}
	stop, err := follow(session, true, &toParent, 0)
	if err != nil {
		return nil, nil, err
	}
	defer stop()
	run, err := kc.Session(session).Send(ctx, "go", client.WithConfig(api.RunConfig{Agent: "relay"}))
	if err != nil {
		return nil, nil, err
	}
	child, err := firstChild(ctx, kc, session)
	if err != nil {
		return nil, nil, err
	}
	stopChild, err := follow(child, false, &toChild, 1)
	if err != nil {
		return nil, nil, err
	}
	defer stopChild()
	if out, err := run.Outcome(ctx); err != nil || out.Text != "done" {
		return nil, nil, fmt.Errorf("run as relay: %q, %v", out.Text, err)
	}
	wg.Wait()
	return toParent, toChild, errors.Join(errs...)
}

// firstChild reads the ID of the session's first child from its log.
func firstChild(ctx context.Context, kc *client.Client, session string) (string, error) {
	for ev, err := range kc.Session(session).EventsFrom(ctx, 0) {
		if err != nil {
			return "", err
		}
		if ev.Type != keel.TypeAgentStarted {
			continue
		}
		e, err := ev.Event()
		if err != nil {
			return "", err
		}
		return e.(keel.AgentStarted).SessionID, nil
	}
	return "", fmt.Errorf("bench: %s started no child", session)
}

// Print writes the report as a table with the ratios against inline.
func (r *DelegationReport) Print(w io.Writer) {
	fmt.Fprintf(w, "delegation: %d runs of each shape (load %s)\n\n", r.Runs, r.Load)
	fmt.Fprintf(w, "%-34s %10s %10s %12s\n", "", "p50", "p99", "actions/run")
	fmt.Fprintf(w, "%-34s %10s %10s %12.1f\n", "inline: 3 model turns in one run", ms(r.Inline.P50()), ms(r.Inline.P99()), r.InlineActions)
	fmt.Fprintf(w, "%-34s %10s %10s %12.1f\n", "delegated: parent 2 + child 1", ms(r.Delegated.P50()), ms(r.Delegated.P99()), r.DelegActions)
	fmt.Fprintf(w, "%-34s %9.2fx %9.2fx %+12.1f\n\n", "delegated / inline", ratio(r.Delegated.P50(), r.Inline.P50()),
		ratio(r.Delegated.P99(), r.Inline.P99()), r.DelegActions-r.InlineActions)
	fmt.Fprintf(w, "%-34s %10s %10s\n", "a child's delta, sealed → subscriber", "p50", "p99")
	fmt.Fprintf(w, "%-34s %10s %10s\n", "of the child (direct)", ms(r.ToChild.P50()), ms(r.ToChild.P99()))
	fmt.Fprintf(w, "%-34s %10s %10s\n", "of the parent (relayed)", ms(r.ToParent.P50()), ms(r.ToParent.P99()))
	fmt.Fprintf(w, "%-34s %9.2fx %9.2fx\n\n", "relayed / direct", ratio(r.ToParent.P50(), r.ToChild.P50()), ratio(r.ToParent.P99(), r.ToChild.P99()))
	fmt.Fprintln(w, "billable actions per run by type (inline | delegated):")
	names := map[string]bool{}
	for k := range r.InlineByType {
		names[k] = true
	}
	for k := range r.DelegatedByType {
		names[k] = true
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-52s %6.1f | %6.1f\n", k, float64(r.InlineByType[k])/float64(r.Runs), float64(r.DelegatedByType[k])/float64(r.Runs))
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
