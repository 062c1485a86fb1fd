package bench_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/bench"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/internal/stack"
	"github.com/keelrun/keel/server/store"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// rerunSourceRuns is how many runs the session BenchmarkRerun reruns the
// last of has.
const rerunSourceRuns = 10

// BenchmarkRerun measures what `keel rerun` costs against a plain run of
// the same prompt from the same point, interleaved b.N times on one
// embedded server whose billable actions and frontend calls it counts
// (bench.ServerCounters). The source session has 10 runs, each a
// read_file of a small file and an answer. The plain run is run 10's
// prompt sent to a session already forked at run 9 and idle (the fork
// made before the clock starts). The rerun is what keel rerun does: read
// the source's log up to run 10's start for its prompt and model, fork at
// run 9, send the prompt with that model to the fork, wait for the
// outcome. It prints the median time of each and their ratio, and the
// billable actions, workflow executions started and frontend calls of
// each per run, by type.
//
//	go test -run '^$' -bench Rerun -benchtime 50x -timeout 30m ./server/bench/
func BenchmarkRerun(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 28*time.Minute)
	defer cancel()
	counters := &bench.ServerCounters{}
	dataDir := b.TempDir()
	srv := keeltest.StartServer(b, devserver.Config{DataDir: dataDir, MetricsHandler: counters.MetricsHandler(),
		FrontendInterceptors: []grpc.UnaryServerInterceptor{counters.Interceptor()}})
	workspace := b.TempDir()
	if err := os.WriteFile(filepath.Join(workspace, "small.txt"), []byte("0123456789abcdef"), 0o600); err != nil {
		b.Fatal(err)
	}
	// The store keeltest.Dial's client reads too.
	st, err := store.Open(ctx, "file://"+filepath.Join(dataDir, "store"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	codec := store.NewCodec(st, store.CodecOptions{})
	tools, err := tool.Builtins(workspace)
	if err != nil {
		b.Fatal(err)
	}
	book := &keeltest.ScriptBook{}
	model := book.Add(b, "rerun", readFileScript("small.txt"))
	cfg := srv.Config()
	stk, err := stack.Build(ctx, stack.Config{Server: srv, Store: stack.StoreConfig{Codec: codec}, SearchAttributes: true,
		Worker: &worker.Options{Models: book, Tools: tools, StopTimeout: time.Second,
			Logger: logging.AtLeast(cfg.Logger, cfg.LogLevel)}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stk.Stop() })
	c, err := client.Dial(ctx, client.Options{Temporal: keeltest.Dial(b, srv), DataConverter: store.NewDataConverter(codec),
		Config: api.RunConfig{Model: model, Tools: []string{"read_file"}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	src := c.Session("rerun-src")
	for i := 1; i <= rerunSourceRuns; i++ {
		if _, _, err := longRun(ctx, src, fmt.Sprintf("prompt %d", i)); err != nil {
			b.Fatal(err)
		}
	}

	var plain, rerun rerunSide
	for i := 0; b.Loop(); i++ {
		base, _, err := src.Fork(ctx, api.Point{Run: rerunSourceRuns - 1}, fmt.Sprintf("rerun-plain-%d", i))
		if err == nil {
			_, err = base.State(ctx) // its first workflow task is done
		}
		if err != nil {
			b.Fatal(err)
		}
		before, t0 := counters.Snapshot(), time.Now()
		if _, _, err := longRun(ctx, base, fmt.Sprintf("prompt %d", rerunSourceRuns)); err != nil {
			b.Fatal(err)
		}
		plain.add(time.Since(t0), counters.Snapshot().Sub(before))

		before, t0 = counters.Snapshot(), time.Now()
		prompt, runModel, err := runPrompt(ctx, src, rerunSourceRuns)
		if err != nil {
			b.Fatal(err)
		}
		fork, _, err := src.Fork(ctx, api.Point{Run: rerunSourceRuns - 1}, fmt.Sprintf("rerun-fork-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := longRun(ctx, fork, prompt, client.WithConfig(api.RunConfig{Model: runModel})); err != nil {
			b.Fatal(err)
		}
		rerun.add(time.Since(t0), counters.Snapshot().Sub(before))
	}
	n := float64(len(plain.walls))
	fmt.Printf("\nrerun of run %d against a plain run of its prompt from the same point, %d of each\n", rerunSourceRuns, len(plain.walls))
	fmt.Printf("%-48s %10s %10s %8s\n", "", "plain run", "rerun", "ratio")
	pw, rw := median(plain.walls), median(rerun.walls)
	fmt.Printf("%-48s %10s %10s %8.2f\n", "time, median", pw.Round(100*time.Microsecond), rw.Round(100*time.Microsecond), float64(rw)/float64(pw))
	row := func(name string, p, r int64) {
		ratio := "—"
		if p > 0 {
			ratio = fmt.Sprintf("%.2f", float64(r)/float64(p))
		}
		fmt.Printf("%-48s %10.1f %10.1f %8s\n", name, float64(p)/n, float64(r)/n, ratio)
	}
	row("billable actions a run", plain.total.Actions.Total(), rerun.total.Actions.Total())
	row("executions started a run", plain.total.executions(), rerun.total.executions())
	row("frontend calls a run", plain.total.RPCs.Total(), rerun.total.RPCs.Total())
	fmt.Println("billable actions by type, a run:")
	for _, k := range slices.Sorted(maps.Keys(union(plain.total.Actions, rerun.total.Actions))) {
		row("  "+k, plain.total.Actions[k], rerun.total.Actions[k])
	}
	fmt.Println("frontend calls by method, a run (where they differ):")
	for _, k := range slices.Sorted(maps.Keys(union(plain.total.RPCs, rerun.total.RPCs))) {
		if plain.total.RPCs[k] != rerun.total.RPCs[k] {
			row("  "+k, plain.total.RPCs[k], rerun.total.RPCs[k])
		}
	}
	b.ReportMetric(float64(rw)/float64(pw), "rerun/plain-time")
	b.ReportMetric(float64(rerun.total.Actions.Total())/float64(max(plain.total.Actions.Total(), 1)), "rerun/plain-actions")
}

// rerunSide is one side of BenchmarkRerun: each run's wall time and what
// the server counted over all of them.
type rerunSide struct {
	walls []time.Duration
	total rerunCounts
}

type rerunCounts struct{ bench.ServerSnapshot }

// executions is the workflow executions started: workflow starts (a
// fork's) and continue-as-new (every keel run ends with one).
func (c rerunCounts) executions() int64 {
	return c.Actions["grpc_StartWorkflowExecution"] + c.Actions["command_ContinueAsNewWorkflowExecution"]
}

func (s *rerunSide) add(wall time.Duration, d bench.ServerSnapshot) {
	s.walls = append(s.walls, wall)
	if s.total.Actions == nil {
		s.total.ServerSnapshot = bench.ServerSnapshot{Actions: bench.Counts{}, RPCs: bench.Counts{}}
	}
	for k, v := range d.Actions {
		s.total.Actions[k] += v
	}
	for k, v := range d.RPCs {
		s.total.RPCs[k] += v
	}
}

func union(a, b bench.Counts) bench.Counts {
	out := maps.Clone(a)
	for k, v := range b {
		out[k] += v
	}
	return out
}

func median(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2]
}

// runPrompt reads s's log from its start up to run n's run.started, as
// keel rerun does, and returns its prompt and model.
func runPrompt(ctx context.Context, s *client.Session, n int) (prompt, model string, err error) {
	id := keel.RunID(s.ID(), n)
	var after int64
	for {
		page, more, err := s.EventsPage(ctx, after, 10_000)
		if err != nil {
			return "", "", err
		}
		for _, env := range page {
			after = env.Seq
			if env.Type != keel.TypeRunStarted || env.RunID != id {
				continue
			}
			ev, err := env.Event()
			if err != nil {
				return "", "", err
			}
			st := ev.(keel.RunStarted)
			return st.Prompt, st.Model, nil
		}
		if !more || len(page) == 0 {
			return "", "", fmt.Errorf("no run.started of %s in its log", id)
		}
	}
}
