package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
)

// sleepingDollarScript is ten turns that each sleep two seconds (a durable
// timer, a quiet point to kill keel dev at) and report 1,000 answer
// tokens: 1.00 USD a request at the price TestKillDevMidBudget gives it.
func sleepingDollarScript() string {
	turns := make([]string, 10)
	for i := range turns {
		turns[i] = fmt.Sprintf(`{"tool_calls":[{"id":"nap%d","name":"sleep","arguments":{"seconds":2}}],"usage":{"input_tokens":1000,"output_tokens":1000}}`, i+1)
	}
	return `{"turns":[` + strings.Join(turns, ",") + `]}`
}

// TestKillDevMidBudget kills -9 the whole `keel dev` twice while a run with
// a money budget is mid-way (after its second and its fourth request),
// starting it again on the same data directory each time: the budget
// still stops the run at exactly the request that would pass it, with one
// terminal event and every request counted once; the session budget of
// the next run counts what the killed run spent (docs/contract.md §20.3).
//
// Each request costs 1.00 USD and each check asks for 1.00 USD (answers
// capped at 1,000 tokens). Run 1, budget 5.00: five requests (4+1 ≤ 5;
// 5+1 > 5). Run 2, session budget 7.00: two (6+1 ≤ 7; 7+1 > 7).
func TestKillDevMidBudget(t *testing.T) {
	rig := newDevKillRig(t, 5*time.Minute)
	ctx := rig.ctx
	model := writeScript(t, sleepingDollarScript())
	conf := filepath.Join(t.TempDir(), "keel.yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("prices:\n  %q: {input: 0, output: 1000, currency: USD}\nlimits:\n  max_tokens: 1000\n", model)), 0o600); err != nil {
		t.Fatal(err)
	}
	rig.flags = []string{"--config", conf}
	const session = "kill-budget"
	usd := func(n float64) *api.Budget { return &api.Budget{Max: n, Currency: "USD"} }

	// untilNth follows run 1 from its start until its n-th tool.started.
	// Right after a restart the server may still send the log's query to
	// the killed worker's queue and time it out: it follows again.
	untilNth := func(c *client.Client, n int) {
		for ctx.Err() == nil {
			seen := 0
			for ev, err := range c.Session(session).Run(1).Events(ctx) {
				if err != nil {
					t.Logf("following run 1 again: %v", err)
					break
				}
				if ev.Type == keel.TypeToolStarted {
					if seen++; seen == n {
						return
					}
				}
				if ev.Terminal() {
					t.Fatalf("run 1 ended before its tool call %d", n)
				}
			}
		}
		t.Fatal(ctx.Err())
	}

	p := rig.start()
	c := rig.dial(p)
	if _, err := c.Session(session).Send(ctx, "spend", client.WithConfig(api.RunConfig{Model: model,
		Tools: []string{"sleep"}, Budget: usd(5)})); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 4} {
		untilNth(c, n)
		c.Close()
		p.kill()
		t.Logf("killed keel dev while run 1 slept after request %d", n)
		p = rig.start()
		c = rig.dial(p)
	}
	defer c.Close()

	sess := c.Session(session)
	o1, err := sess.Run(1).Outcome(ctx)
	if !errors.Is(err, keel.ErrBudgetExceeded) || !strings.Contains(err.Error(), "the run budget (set by the caller) has 0.00 USD left of 5.00 USD") {
		t.Fatalf("run 1: %v", err)
	}
	run2, err := sess.Send(ctx, "more", client.WithConfig(api.RunConfig{Model: model, Tools: []string{"sleep"},
		Budget: usd(5), SessionBudget: usd(7)}))
	if err != nil {
		t.Fatal(err)
	}
	o2, err := run2.Outcome(ctx)
	if !errors.Is(err, keel.ErrBudgetExceeded) || !strings.Contains(err.Error(), "the session budget (set by the caller) has 0.00 USD left of 7.00 USD") {
		t.Fatalf("run 2: %v", err)
	}
	for i, o := range []keel.Outcome{o1, o2} {
		want := []int{5, 2}[i]
		if o.UsageTotal.Requests != want || o.UsageTotal.Cost.In("USD") != int64(want)*1e9 {
			t.Errorf("run %d's outcome: %d requests costing %d nanos, want %d and %d", i+1,
				o.UsageTotal.Requests, o.UsageTotal.Cost.In("USD"), want, int64(want)*1e9)
		}
	}

	log, err := sess.EventsAfter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkDenseLog(t, log, []string{"spend", "more"})
	// Every request counted once: one usage fact per (run, step,
	// attempt), each 1.00 USD, the run's running total rising by it.
	type request struct {
		run           string
		step, attempt int
	}
	counted := map[request]bool{}
	totals := map[string]int64{}
	for _, ev := range log {
		if ev.Type != keel.TypeUsageUpdated {
			continue
		}
		e, err := ev.Event()
		if err != nil {
			t.Fatal(err)
		}
		u := e.(keel.UsageUpdated)
		r := request{ev.RunID, u.Step, u.Attempt}
		if counted[r] {
			t.Errorf("%+v counted twice", r)
		}
		counted[r] = true
		totals[ev.RunID] += u.Usage.Cost.In("USD")
		if u.Usage.Cost.In("USD") != 1e9 || u.Total.Cost.In("USD") != totals[ev.RunID] {
			t.Errorf("%+v: cost %d, total %d; want 1e9 and %d", r, u.Usage.Cost.In("USD"), u.Total.Cost.In("USD"), totals[ev.RunID])
		}
	}
	if len(counted) != 7 {
		t.Errorf("%d requests counted, want 7", len(counted))
	}
	state, err := sess.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if state.Usage.Cost.In("USD") != 7e9 || state.Usage.Requests != 7 {
		t.Errorf("the session's usage: %+v, want 7 requests costing 7.00 USD", state.Usage)
	}
}
