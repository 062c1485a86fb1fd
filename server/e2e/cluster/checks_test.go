package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
)

// result is what a batch measured and what its checks found.
type result struct {
	name string
	// affected are the runs not yet ended when the fault began.
	affected int
	// firstProgress and completion run from the fault's start to each
	// affected run's first event after it and to its terminal event.
	firstP50, firstP99, doneP50, doneP99 time.Duration
	// runP50 and runP99 are every run's time from its send to its
	// terminal event: unlike the times from the fault, they do not
	// depend on when in the runs the fault began, so batches compare.
	runP50, runP99 time.Duration
	// hold is how long the fault lasted.
	hold time.Duration
	// lost runs have no terminal event; twice counts tool effects applied
	// more than once; failed runs ended in run.failed.
	lost, twice, failed int
	// aborted tool calls: started on a worker that died or was cut off,
	// and run again.
	aborted int
	// deduped tool calls: run again after they applied their effect,
	// and answered from it by the idempotency key.
	deduped        int
	deltas, lagged int
	// missedDeltas counts runs whose follower got fewer text deltas than
	// the script streams; each must have been told so by a Lagged.
	missedDeltas int
	sendRetries  int
	resumes      int
	failures     []string
}

// checkBatch checks every run of b against the session logs and the
// effects server, and measures it.
func checkBatch(t *testing.T, ctx context.Context, c *client.Client, top *topology, b *batch) result {
	t.Helper()
	r := result{name: b.name, hold: b.healed.Sub(b.faultAt)}
	var first, done, run []time.Duration
	for _, p := range b.runs {
		r.deltas += p.deltas
		r.lagged += p.lagged
		r.sendRetries += len(p.sendErrors)
		r.resumes += p.resumes
		// A run sent through a gateway is followed from after its send,
		// so it may miss its first deltas without lag (an SDK send
		// subscribes before it sends); a follower that broke and resumed
		// (a `keel run` run again) knows it may have missed some. Any
		// other run missing deltas must have been told by a Lagged.
		if p.textDeltas < 2*turnChunks {
			r.missedDeltas++
			if p.lagged == 0 && p.resumes == 0 && !p.viaGateway {
				t.Errorf("%s: %s: the follower got %d of %d text deltas and no Lagged", b.name, p.session, p.textDeltas, 2*turnChunks)
			}
		}
		if p.terminal == nil {
			r.lost++
			t.Errorf("%s: %s: no terminal event (send errors: %v)", b.name, p.session, tailStrings(p.sendErrors, 3))
			continue
		}
		run = append(run, p.done.Sub(p.sent))
		if !b.faultAt.IsZero() && p.done.After(b.faultAt) {
			r.affected++
			done = append(done, p.done.Sub(b.faultAt))
			for _, at := range p.arrivals {
				if !at.Before(b.faultAt) {
					first = append(first, at.Sub(b.faultAt))
					break
				}
			}
		}
		if p.terminal.Type == keel.TypeRunFailed {
			r.failed++
			r.failures = append(r.failures, fmt.Sprintf("%s: %s", p.session, p.terminal.Data))
		}
		checkLog(t, ctx, c, b.name, p)
		for _, key := range []string{p.session + "/fast", p.session + "/slow"} {
			applied, aborted, deduped := top.effects.counts(key)
			r.aborted += aborted
			r.deduped += deduped
			if applied > 1 {
				r.twice++
				t.Errorf("%s: tool call %s applied its effect %d times (%d aborted); its activities:\n%s", b.name, key, applied, aborted,
					toolAttempts(ctx, c, p.session))
			}
			if applied == 0 && p.terminal.Type == keel.TypeRunCompleted {
				t.Errorf("%s: %s completed but tool call %s applied nothing", b.name, p.session, key)
			}
		}
	}
	if slowest := slowestRun(b); slowest != nil {
		t.Logf("%s: the slowest run's durable events, from the fault: %s", b.name, timeline(slowest, b.faultAt))
	}
	r.firstP50, r.firstP99 = percentile(first, 50), percentile(first, 99)
	r.doneP50, r.doneP99 = percentile(done, 50), percentile(done, 99)
	r.runP50, r.runP99 = percentile(run, 50), percentile(run, 99)
	return r
}

// checkLog: the session's log is dense (sequences 1..n), holds exactly one
// run, started once and ended by exactly one terminal event, and the
// follower received exactly the run's durable events.
func checkLog(t *testing.T, ctx context.Context, c *client.Client, batch string, p *progress) {
	t.Helper()
	log, err := c.Session(p.session).EventsAfter(ctx, 0)
	if err != nil {
		t.Errorf("%s: %s: read the log: %v", batch, p.session, err)
		return
	}
	var starts, terminals int
	var runSeqs []int64
	runs := map[string]bool{}
	for i, ev := range log {
		if ev.Seq != int64(i+1) {
			t.Errorf("%s: %s: log not dense: event %d has seq %d", batch, p.session, i, ev.Seq)
			return
		}
		if ev.RunID != "" {
			runs[ev.RunID] = true
		}
		if ev.RunID == p.runID {
			runSeqs = append(runSeqs, ev.Seq)
		}
		switch {
		case ev.Type == keel.TypeRunStarted:
			starts++
		case ev.Terminal():
			terminals++
		}
	}
	if starts != 1 || terminals != 1 || len(runs) != 1 {
		t.Errorf("%s: %s: %d runs, %d run.started, %d terminal events; want one of each", batch, p.session, len(runs), starts, terminals)
	}
	var got []int64
	for seq := range p.durable {
		got = append(got, seq)
	}
	slices.Sort(got)
	if !slices.Equal(got, runSeqs) {
		t.Errorf("%s: %s: the follower received seqs %v, the log holds %v for the run", batch, p.session, got, runSeqs)
	}
}

// toolAttempts lists the Tool activities' attempts in a session's current
// execution, to say why a tool ran again.
func toolAttempts(ctx context.Context, c *client.Client, session string) string {
	var b strings.Builder
	it := c.Temporal().GetWorkflowHistory(ctx, session, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			fmt.Fprintf(&b, "  history: %v\n", err)
			break
		}
		switch {
		case ev.GetActivityTaskScheduledEventAttributes() != nil:
			a := ev.GetActivityTaskScheduledEventAttributes()
			fmt.Fprintf(&b, "  %d scheduled %s %s\n", ev.GetEventId(), a.GetActivityType().GetName(), a.GetActivityId())
		case ev.GetActivityTaskStartedEventAttributes() != nil:
			a := ev.GetActivityTaskStartedEventAttributes()
			fmt.Fprintf(&b, "  %d started %d by %s attempt %d last failure %v\n", ev.GetEventId(), a.GetScheduledEventId(), a.GetIdentity(), a.GetAttempt(), a.GetLastFailure().GetMessage())
		case ev.GetActivityTaskCompletedEventAttributes() != nil:
			fmt.Fprintf(&b, "  %d completed %d at %v\n", ev.GetEventId(), ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId(), ev.GetEventTime().AsTime().Format("15:04:05.000"))
		case ev.GetActivityTaskFailedEventAttributes() != nil:
			fmt.Fprintf(&b, "  %d failed: %v\n", ev.GetEventId(), ev.GetActivityTaskFailedEventAttributes().GetFailure().GetMessage())
		case ev.GetActivityTaskTimedOutEventAttributes() != nil:
			fmt.Fprintf(&b, "  %d timed out: %v\n", ev.GetEventId(), ev.GetActivityTaskTimedOutEventAttributes().GetFailure().GetMessage())
		}
	}
	return b.String()
}

// slowestRun is the run of b that ended last.
func slowestRun(b *batch) *progress {
	var last *progress
	for _, p := range b.runs {
		if p.terminal != nil && (last == nil || p.done.After(last.done)) {
			last = p
		}
	}
	return last
}

// timeline lists a run's durable events with their arrival after from.
func timeline(p *progress, from time.Time) string {
	var b strings.Builder
	for i, typ := range p.types {
		if strings.HasSuffix(typ, ".delta") {
			continue
		}
		fmt.Fprintf(&b, "%s %+.1fs; ", typ, p.arrivals[i].Sub(from).Seconds())
	}
	return b.String()
}

func tailStrings(s []string, n int) []string {
	return s[max(len(s)-n, 0):]
}

func percentile(ds []time.Duration, q int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*q + 99) / 100
	return s[max(i-1, 0)]
}

// table renders results as the Markdown table docs/operations.md keeps.
func table(results []result) string {
	var b strings.Builder
	b.WriteString("| fault | held | runs in flight | first progress p50 / p99 | completed p50 / p99 | run time p50 / p99 | lost | failed | tools twice | tool calls aborted / deduplicated | deltas / lagged / runs missing deltas | send retries | follows resumed |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %v | %d | %v / %v | %v / %v | %v / %v | %d | %d | %d | %d / %d | %d / %d / %d | %d | %d |\n",
			r.name, r.hold.Round(100*time.Millisecond), r.affected,
			r.firstP50.Round(10*time.Millisecond), r.firstP99.Round(10*time.Millisecond),
			r.doneP50.Round(100*time.Millisecond), r.doneP99.Round(100*time.Millisecond),
			r.runP50.Round(100*time.Millisecond), r.runP99.Round(100*time.Millisecond),
			r.lost, r.failed, r.twice, r.aborted, r.deduped, r.deltas, r.lagged, r.missedDeltas, r.sendRetries, r.resumes)
	}
	return b.String()
}
