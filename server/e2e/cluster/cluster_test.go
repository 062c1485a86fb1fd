// Package cluster_test runs keel as it runs on more than one machine: a
// Temporal server on PostgreSQL and two `keel worker` processes of the real
// binary, each with its own workspace and its own NATS server. It needs
// PostgreSQL (KEEL_POSTGRES_DSN; `make test-postgres` sets it) and skips
// without it.
package cluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/internal/syncbuf"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/server/activities"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// turnText is the scripted model's answer: 20 chunks 100 ms apart, so a
// turn streams for about 2 s and a kill lands in the middle of it.
var turnText = func() []string {
	chunks := make([]string, 20)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("chunk %02d. ", i)
	}
	return chunks
}()

// TestTwoWorkersOnPostgres: both workers take work; a run whose model turn
// is streaming on one worker when that worker is killed with SIGKILL
// completes on the other; a run streaming while the server restarts
// completes after the restart, and new runs start on the restarted server.
func TestTwoWorkersOnPostgres(t *testing.T) {
	pg := keeltest.Postgres(t)
	if testing.Short() {
		t.Skip("starts a Temporal server and keel worker processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin := keeltest.KeelBinary(t)
	dir := t.TempDir()
	// The workers offer the script as scripted:cluster (--scripts).
	scripts := filepath.Join(dir, "scripts")
	if err := os.Mkdir(scripts, 0o700); err != nil {
		t.Fatal(err)
	}
	writeScript(t, filepath.Join(scripts, "cluster.json"))

	srv := keeltest.StartServer(t, devserver.Config{Postgres: pg})
	var nats [2]*live.NATS
	var natsURLs [2]string
	var workers [2]*workerProcess
	workspace := func(i int) string { return filepath.Join(dir, fmt.Sprintf("workspace-%d", i)) }
	for i := range workers {
		natsURLs[i] = keeltest.StartNATSServer(t).ClientURL()
		nats[i] = keeltest.DialNATS(t, natsURLs[i], live.NATSOptions{})
		workers[i] = startWorker(t, bin, srv.Address(), natsURLs[i], workspace(i), scripts)
	}
	c, err := client.Dial(ctx, client.Options{HostPort: srv.Address(),
		// A killed worker's turn is retried once its heartbeat is missed.
		Config: api.RunConfig{Model: "scripted:cluster", HeartbeatAfter: keel.Duration(2 * time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sessions := 0
	// send starts a run on a new session and reports which worker streams
	// its model turn: each worker publishes deltas to its own NATS server.
	send := func() (*client.Run, *streamWatch) {
		sessions++
		id := fmt.Sprintf("cluster-%d", sessions)
		w := watchSession(t, ctx, nats, id)
		run, err := c.Session(id).Send(ctx, "go")
		if err != nil {
			t.Fatalf("send to %s: %v", id, err)
		}
		return run, w
	}
	complete := func(run *client.Run) {
		t.Helper()
		out, err := run.Outcome(ctx)
		if err != nil {
			t.Fatalf("run %s: %v", run.ID, err)
		}
		if got, want := out.Text, strings.Join(turnText, ""); got != want {
			t.Fatalf("run %s answered %q, want %q", run.ID, got, want)
		}
	}

	// Both workers take work. Which worker takes a new session is up to
	// the pollers, so sessions are started until each worker streamed a
	// turn (one more session halves the odds that one worker got none).
	var runs []*client.Run
	var streamed [2]int
	for streamed[0] == 0 || streamed[1] == 0 {
		if sessions == 24 {
			t.Fatalf("after %d sessions, the workers streamed %v turns", sessions, streamed)
		}
		run, w := send()
		streamed[w.next(t, ctx)]++
		runs = append(runs, run)
	}
	for _, run := range runs {
		complete(run)
	}
	turns := turnsByWorker(t, ctx, c.Temporal(), workers, runs)
	if turns[0] == 0 || turns[1] == 0 {
		t.Errorf("model turns started by worker in history: %v, want some by each", turns)
	}
	t.Logf("%d sessions: worker 0 streamed %d turns, worker 1 %d; model turns started by each in history: %v",
		sessions, streamed[0], streamed[1], turns)

	// kill -9 the worker that streams a turn, mid-stream: the run
	// completes on the other worker, which streams the turn again.
	run, w := send()
	victim := w.next(t, ctx)
	killed := time.Now()
	workers[victim].kill()
	for w.next(t, ctx) == victim {
		// deltas the victim published before it died
	}
	t.Logf("worker %d killed mid-turn; worker %d streamed the turn %v later", victim, 1-victim, time.Since(killed).Round(time.Millisecond))
	complete(run)
	// History shows both attempts: the victim's, timed out, and the
	// survivor's.
	if got := turnsByWorker(t, ctx, c.Temporal(), workers, []*client.Run{run}); got[victim] != 1 || got[1-victim] != 1 {
		t.Errorf("model turns of the run by worker in history: %v, want one each", got)
	}
	t.Logf("run %s completed %v after the kill", run.ID, time.Since(killed).Round(time.Millisecond))
	// A new worker replaces the dead one, as a restart policy would.
	workers[victim] = startWorker(t, bin, srv.Address(), natsURLs[victim], workspace(victim), scripts)

	// Restart the server while a turn streams: the run completes, and new
	// runs start, on the restarted server (same databases, same port).
	run, w = send()
	w.next(t, ctx)
	cfg := srv.Config()
	restarted := time.Now()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	srv, err = devserver.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("restart the server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	t.Logf("server restarted in %v", time.Since(restarted).Round(time.Millisecond))
	complete(run)
	after, _ := send()
	complete(after)
	t.Logf("the run streaming across the restart completed, and a new one, %v after the restart", time.Since(restarted).Round(time.Millisecond))
	for i, w := range workers {
		if err := w.alive(); err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
}

// writeScript writes the scripted model: one streaming turn, played by
// every session.
func writeScript(t *testing.T, path string) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"name":"cluster","repeat":true,"chunk_delay":"100ms","turns":[{"text":[`)
	for i, c := range turnText {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(strconv.Quote(c))
	}
	b.WriteString(`],"usage":{"input_tokens":10,"output_tokens":20}}]}`)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// turnsByWorker counts the model turns of runs by the worker that started
// them, from the identities in their histories. A run executes in its
// session's own workflow (an inline session, one execution per run), and
// each session here holds one run: every execution of the run's session
// is read, from the current one back (each execution's first event names
// the one it continued).
func turnsByWorker(t *testing.T, ctx context.Context, tc sdkclient.Client, workers [2]*workerProcess, runs []*client.Run) [2]int {
	t.Helper()
	var counts [2]int
	for _, run := range runs {
		session := run.Session().ID()
		d, err := tc.DescribeWorkflowExecution(ctx, session, "")
		if err != nil {
			t.Fatalf("describe %s: %v", session, err)
		}
		for execution := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(); execution != ""; {
			it := tc.GetWorkflowHistory(ctx, session, execution, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			execution = ""
			scheduled := map[int64]string{}
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatalf("history of %s (run %s): %v", session, run.ID, err)
				}
				if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
					execution = a.GetContinuedExecutionRunId()
				}
				if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
					scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
				}
				if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] == activities.ModelTurnName {
					for i, w := range workers {
						if w.hasIdentity(a.GetIdentity()) {
							counts[i]++
						}
					}
				}
			}
		}
	}
	return counts
}

// streamWatch follows a session's live deltas on every worker's NATS
// server and reports which worker each came from.
type streamWatch struct {
	from chan int
}

func watchSession(t *testing.T, ctx context.Context, chans [2]*live.NATS, sessionID string) *streamWatch {
	t.Helper()
	w := &streamWatch{from: make(chan int, 4096)}
	for i, ch := range chans {
		sub, err := ch.Subscribe(ctx, sessionID, live.SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Close() })
		go func() {
			for {
				_, err := sub.Next(ctx)
				var lagged *live.LaggedError
				if err != nil && !errors.As(err, &lagged) {
					return // the test is over
				}
				select {
				case w.from <- i:
				default: // nobody reads this far
				}
			}
		}()
	}
	return w
}

// next waits for the next delta and returns the index of the worker that
// published it.
func (w *streamWatch) next(t *testing.T, ctx context.Context) int {
	t.Helper()
	select {
	case i := <-w.from:
		return i
	case <-ctx.Done():
		t.Fatal("no delta before the test's deadline")
		return -1
	}
}

// workerProcess is a `keel worker` in a process of its own.
type workerProcess struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	exited chan struct{}
}

// startWorker runs `keel worker` against address, publishing deltas to
// natsURL, and returns once it polls.
func startWorker(t *testing.T, bin, address, natsURL, workspace, scripts string) *workerProcess {
	t.Helper()
	cmd := exec.Command(bin, "worker", "--address", address, "--namespace", devserver.DefaultNamespace,
		"--nats", natsURL, "--workspace", workspace, "--scripts", scripts, "--stop-timeout", "1s")
	p := &workerProcess{cmd: cmd, stderr: &syncbuf.Buffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("worker %d stderr:\n%s", cmd.Process.Pid, p.stderr.String())
		}
	})
	ready := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if strings.Contains(lines.Text(), "polling task queue") {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(p.exited)
	}()
	select {
	case <-ready:
		return p
	case <-p.exited:
		t.Fatalf("keel worker did not come up: %v\n%s", cmd.ProcessState, p.stderr.String())
		return nil
	}
}

// hasIdentity reports whether id is this process's Temporal identity, the
// SDK's default "PID@HOST@".
func (p *workerProcess) hasIdentity(id string) bool {
	host, _ := os.Hostname()
	return strings.HasPrefix(id, fmt.Sprintf("%d@%s@", p.cmd.Process.Pid, host))
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *workerProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// alive reports an error if the process has exited.
func (p *workerProcess) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("exited: %v\n%s", p.cmd.ProcessState, p.stderr.String())
	default:
		return nil
	}
}
