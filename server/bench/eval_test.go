package bench_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// evalScript answers at once with a little streamed text.
const evalScript = `{"repeat":true,"turns":[{"text":["the ","answer ","is ","42"],"usage":{"input_tokens":12,"output_tokens":4}}]}`

// evalStack is one embedded server, a worker on it playing evalScript,
// and a client.
func evalStack(b *testing.B) (context.Context, *client.Client, api.RunConfig) {
	ctx, cancel := context.WithTimeout(context.Background(), 28*time.Minute)
	b.Cleanup(cancel)
	book := &keeltest.ScriptBook{}
	model := book.Add(b, "eval", evalScript)
	srv := keeltest.StartServer(b, devserver.Config{})
	keeltest.StartWorker(b, srv, keeltest.WorkerOptions{Models: book})
	return ctx, keeltest.Client(b, srv, nil), api.RunConfig{Model: model, Tools: []string{}}
}

// BenchmarkEvalOverhead measures what a case of an eval costs against a
// plain run of the same prompt, interleaved b.N times on one embedded
// server: the plain run is a send to a new session and its outcome; the
// case is an eval of that one prompt (start, the case's activity, its
// session's run, reading its log, scoring, the report). It prints the
// median of each and their ratio.
//
//	go test -run '^$' -bench EvalOverhead -benchtime 30x ./server/bench/
func BenchmarkEvalOverhead(b *testing.B) {
	ctx, c, cfg := evalStack(b)
	var plain, cases []time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		run, err := c.NewSession().Send(ctx, "What is 6*7?", client.WithConfig(cfg))
		if err == nil {
			_, err = run.Outcome(ctx)
		}
		if err != nil {
			b.Fatal(err)
		}
		plain = append(plain, time.Since(t0))

		t0 = time.Now()
		ev, err := c.StartEval(ctx, api.EvalInput{ID: fmt.Sprintf("overhead-%d-%d", time.Now().UnixNano(), i), Candidate: cfg,
			Cases: []api.EvalCase{{ID: "q", Prompt: "What is 6*7?", Expect: api.EvalExpect{Contains: []string{"42"}}}}})
		if err != nil {
			b.Fatal(err)
		}
		rep, err := ev.Report(ctx)
		if err != nil || rep.Candidate.Passed != 1 {
			b.Fatalf("report %+v: %v", rep.Candidate, err)
		}
		cases = append(cases, time.Since(t0))
	}
	p, e := median(plain), median(cases)
	b.ReportMetric(float64(p.Microseconds())/1000, "plain-ms")
	b.ReportMetric(float64(e.Microseconds())/1000, "case-ms")
	b.ReportMetric(float64(e)/float64(p), "ratio")
	fmt.Printf("eval overhead, %d each: plain run p50 %v, one-case eval p50 %v, ratio %.2f\n", len(plain),
		p.Round(time.Millisecond), e.Round(time.Millisecond), float64(e)/float64(p))
}

// BenchmarkEval200 runs an eval of 200 cases at a concurrency of 20, and
// the same 200 prompts as plain runs from 20 goroutines, on one embedded
// server, and prints each's wall time and their ratio.
//
//	go test -run '^$' -bench Eval200 -benchtime 1x ./server/bench/
func BenchmarkEval200(b *testing.B) {
	const n, conc = 200, 20
	ctx, c, cfg := evalStack(b)
	cases := make([]api.EvalCase, n)
	for i := range cases {
		cases[i] = api.EvalCase{ID: fmt.Sprintf("case-%d", i), Prompt: fmt.Sprintf("What is 6*7? (%d)", i),
			Expect: api.EvalExpect{Contains: []string{"42"}}}
	}
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		var wg sync.WaitGroup
		work := make(chan int)
		errs := make(chan error, n)
		for range conc {
			wg.Go(func() {
				for j := range work {
					run, err := c.NewSession().Send(ctx, cases[j].Prompt, client.WithConfig(cfg))
					if err == nil {
						_, err = run.Outcome(ctx)
					}
					if err != nil {
						errs <- err
					}
				}
			})
		}
		for j := range n {
			work <- j
		}
		close(work)
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		plain := time.Since(t0)

		t0 = time.Now()
		ev, err := c.StartEval(ctx, api.EvalInput{ID: fmt.Sprintf("e200-%d-%d", time.Now().UnixNano(), i), Candidate: cfg,
			Cases: cases, Concurrency: conc})
		if err != nil {
			b.Fatal(err)
		}
		rep, err := ev.Report(ctx)
		if err != nil || rep.Candidate.Passed != n {
			b.Fatalf("report %+v: %v", rep.Candidate, err)
		}
		wall := time.Since(t0)
		b.ReportMetric(wall.Seconds(), "eval-s")
		b.ReportMetric(plain.Seconds(), "plain-s")
		fmt.Printf("%d cases at concurrency %d: eval %v, plain runs %v, ratio %.2f; case p50 %v p99 %v\n", n, conc,
			wall.Round(time.Millisecond), plain.Round(time.Millisecond), wall.Seconds()/plain.Seconds(),
			rep.Candidate.DurationP50.Std().Round(time.Millisecond), rep.Candidate.DurationP99.Std().Round(time.Millisecond))
	}
}
