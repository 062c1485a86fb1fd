package bench_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/bench"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/scripted"
)

// BenchmarkConcurrentStreams runs b.N keel sessions at once, each one
// streaming run, against b.N bare Temporal workflows streaming as long
// without heartbeats (started by a start call, and by an update-with-start
// whose p99 keel's sends are judged against), on a fresh embedded server tuned as `keel dev` runs
// it, with workers in this process; 10% of each side are cancelled
// mid-stream. It prints the whole table (ratios, the server's calls,
// heartbeats, history events and persistence requests per run) and
// reports the headline figures as metrics. `keel-bench concurrency` runs
// the same with its workers in processes of their own.
//
//	go test -run '^$' -bench ConcurrentStreams -benchtime 20x ./server/bench/
func BenchmarkConcurrentStreams(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	rep, err := bench.MeasureConcurrency(ctx, bench.ConcurrencyOptions{
		Sessions: []int{b.N}, CancelFraction: 0.1,
		Progress: func(n int, phase string) { b.Logf("%d sessions: %s", n, phase) },
	})
	if err != nil {
		b.Fatal(err)
	}
	// The table goes to stdout whole: the benchmark log would truncate it.
	rep.WriteTable(os.Stdout)
	p := rep.Points[0]
	r50, r99 := p.RunRatios()
	b.ReportMetric(r50, "run-p50-x-bare")
	b.ReportMetric(r99, "run-p99-x-bare")
	p.Keel.Starts.Report(b, "send")
	b.ReportMetric(p.SendRatio(), "send-p99-x-bare-uws")
	p.Keel.Cancels.Report(b, "cancel")
	b.ReportMetric(p.Keel.HeartbeatsPerSecond(), "heartbeats/s/turn")
	b.ReportMetric(p.Keel.RPCsPerRun(), "rpcs/run")
	b.ReportMetric(p.Baseline.RPCsPerRun(), "bare-rpcs/run")
	if p.Keel.Failed > 0 || p.Baseline.Failed > 0 {
		b.Errorf("%d keel and %d bare sessions failed: %v %v", p.Keel.Failed, p.Baseline.Failed, p.Keel.Errors, p.Baseline.Errors)
	}
}

// TestStreamTurnsMatchTheScriptedProvider pins the model time the
// baseline copies: the scripted provider pauses before every chunk it
// streams, text or not.
func TestStreamTurnsMatchTheScriptedProvider(t *testing.T) {
	s := bench.StreamScript()
	s.ChunkDelay = 0
	p := scripted.New(s)
	msgs := []keel.Message{{Role: keel.RoleUser, Content: "go"}}
	for i, want := range bench.StreamTurns() {
		chunks := 0
		for _, err := range p.Stream(context.Background(), provider.Request{Messages: msgs, Attempt: 1}) {
			if err != nil {
				t.Fatalf("turn %d: %v", i, err)
			}
			chunks++
		}
		if got := time.Duration(chunks) * bench.StreamChunkDelay; got != want {
			t.Errorf("turn %d streams %v (%d chunks), StreamTurns says %v", i, got, chunks, want)
		}
		msgs = append(msgs, keel.Message{Role: keel.RoleAssistant, Content: "done"})
	}
	if bench.ModelTime() != 7600*time.Millisecond {
		t.Errorf("ModelTime = %v, want 7.6 s", bench.ModelTime())
	}
}
