package e2e_test

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// forkSamples is how many forks and rewinds TestForkAndRewindCost times
// at each point.
const forkSamples = 7

// TestForkAndRewindCost measures what a fork and a rewind add, in time and
// in content-store bytes, at run 10 and at run 100 of one session
// (docs/contract.md §19.5): each run's prompt and answer are about 1 KiB,
// so at run 100 the transcript is about 200 KiB. A fork stores its
// input's transcript by content, so the bytes it adds are what the store
// does not already hold; a rewind stores nothing; neither copies an
// event. The times are medians, logged beside a state query's at the same
// point as a ratio, not asserted (a shared machine); the bytes are
// bounded.
func TestForkAndRewindCost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 100 runs on a Temporal server")
	}
	ctx := testContext(t, 20*time.Minute)
	data := t.TempDir()
	srv := keeltest.StartServer(t, devserver.Config{DataDir: data})
	// Text without a period: the content store cuts values where their
	// content says (docs/ARCHITECTURE.md, "Chunks"), and text that repeats
	// every few bytes offers no such place.
	rng := rand.New(rand.NewPCG(1, 2))
	letters := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(rng.IntN(26))
		}
		return string(b)
	}
	answer := []byte(letters(1000))
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Script: `{"repeat":true,"turns":[{"text":["` + string(answer) + `"]}]}`})
	c := keeltest.Client(t, srv, nil)
	sess := c.Session("fork-cost")
	storeBytes := func() int64 {
		var n int64
		_ = filepath.WalkDir(filepath.Join(data, "store"), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if info, err := d.Info(); err == nil {
					n += info.Size()
				}
			}
			return nil
		})
		return n
	}
	type cost struct {
		fork, state, rewind              time.Duration
		runBytes, forkBytes, rewindBytes int64
	}
	costs := map[int]cost{}
	// KEEL_FORK_COST_DEEP=1 measures at run 1,000 too (about 3 minutes
	// more; docs/performance.md, "Fork and rewind").
	points := []int{10, 100}
	if os.Getenv("KEEL_FORK_COST_DEEP") == "1" {
		points = append(points, 1000)
	}
	last := points[len(points)-1]
	for n := 1; n <= last; n++ {
		runStart := storeBytes()
		prompt := fmt.Sprintf("prompt %d %s", n, letters(1000))
		run, err := sess.Send(ctx, prompt, client.WithConfig(api.RunConfig{Tools: []string{}}))
		require.NoError(t, err)
		_, err = run.Outcome(ctx)
		require.NoError(t, err)
		if !slices.Contains(points, n) {
			continue
		}
		var k cost
		before := storeBytes()
		k.runBytes = before - runStart
		t.Logf("run %d itself added %d store bytes", n, k.runBytes)
		// The first call waits for the session's execution to take its
		// first workflow task (Temporal holds it back up to a second after
		// a quick run, docs/ARCHITECTURE.md); the second is the fork's own
		// cost.
		_, _, err = sess.Fork(ctx, api.Point{Run: n}, fmt.Sprintf("fork-cost-at-%d", n))
		require.NoError(t, err)
		first := storeBytes() - before
		before = storeBytes()
		_, _, err = sess.Fork(ctx, api.Point{Run: n}, fmt.Sprintf("fork-cost-again-at-%d", n))
		require.NoError(t, err)
		k.forkBytes = storeBytes() - before
		t.Logf("run %d: the first fork added %d store bytes", n, first)
		// Times: forkSamples forks, each beside a state query of the
		// source (the baseline: one round trip to the session's
		// workflow), then as many rewinds to the same point (each one
		// more session.rewound).
		var forks, states, rewinds []time.Duration
		for i := range forkSamples {
			start := time.Now()
			_, err = sess.State(ctx)
			states = append(states, time.Since(start))
			require.NoError(t, err)
			start = time.Now()
			_, _, err = sess.Fork(ctx, api.Point{Run: n}, fmt.Sprintf("fork-cost-at-%d-%d", n, i))
			forks = append(forks, time.Since(start))
			require.NoError(t, err)
		}
		before = storeBytes()
		for range forkSamples {
			start := time.Now()
			_, err = sess.Rewind(ctx, api.Point{Run: n})
			rewinds = append(rewinds, time.Since(start))
			require.NoError(t, err)
		}
		k.rewindBytes = storeBytes() - before
		k.fork, k.state, k.rewind = median(forks), median(states), median(rewinds)
		costs[n] = k
		hist, err := sess.History(ctx, 0, 0)
		require.NoError(t, err)
		t.Logf("run %d (transcript %d messages), medians of %d: fork %v (%.2fx a state query's %v), +%d store bytes; rewind %v (%.2fx), +%d store bytes",
			n, hist.Total, forkSamples, k.fork.Round(100*time.Microsecond), ratio(k.fork, k.state), k.state.Round(100*time.Microsecond),
			k.forkBytes, k.rewind.Round(100*time.Microsecond), ratio(k.rewind, k.state), k.rewindBytes)
	}
	for _, n := range points {
		t.Logf("at run %4d: fork %5.2fx, rewind %5.2fx a state query", n, ratio(costs[n].fork, costs[n].state), ratio(costs[n].rewind, costs[n].state))
	}
	for _, n := range points {
		// A rewind stores nothing. A fork stores its input's transcript
		// by content, in chunks the source's transcript already holds
		// but for the few where the fork's framing meets it: a few KiB,
		// at run 10 as at run 100 (docs/ARCHITECTURE.md, "Chunks").
		require.Zero(t, costs[n].rewindBytes, "a rewind at run %d stored bytes", n)
		require.LessOrEqual(t, costs[n].forkBytes, int64(8<<10), "a fork at run %d stored more than 8 KiB", n)
	}
}

// median returns the middle of ds (which it sorts).
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }
