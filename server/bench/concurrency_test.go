package bench_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
