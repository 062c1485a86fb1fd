package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/claimcheck"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/store"
)

// devKillScript reads the 64 KiB big.txt in every run, so each run writes
// several values to the content store (the tool's result, the model
// turn's input that carries it, the run's result), then answers.
const devKillScript = `{"repeat":true,"turns":[
  {"tool_calls":[{"id":"read","name":"read_file","arguments":{"path":"big.txt"}}]},
  {"text":["read it"]}
]}`

// devProcess is a `keel dev` in a process of its own, so it can be killed
// with SIGKILL: server, worker and content-store writer all at once.
type devProcess struct {
	cmd     *exec.Cmd
	address string
	// api is its HTTP API's base URL (http://127.0.0.1:PORT/v1).
	api string
	// paused receives each pause point (devpause_test.go) the process
	// holds a call at; held is those waitPaused has seen.
	paused chan string
	held   map[string]bool
}

// envDevPause names the pause points a `keel dev` started by a test arms
// (devpause_test.go), separated by commas; devPausedLine starts the line
// it prints on stdout when it holds a call at one.
const (
	envDevPause   = "KEEL_TEST_DEV_PAUSE"
	devPausedLine = "keel-test-paused"
)

// startDevProcess runs this test binary as `keel dev` on dataDir and
// waits until it printed its addresses. Its gRPC port is port (0: a free
// one); its other ports are free ones. pauses are the points it holds
// calls at (envDevPause); extra are more flags for keel dev.
func startDevProcess(t *testing.T, dataDir, workspace string, port int, pauses []string, extra ...string) *devProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "dev", "--data-dir", dataDir, "--workspace", workspace, "--scripts", testScripts(), "--no-ui",
		"--port", strconv.Itoa(port), "--nats-port", "0", "--http-port", "0")
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = append(os.Environ(), envRunAsKeel+"=1", envDevPause+"="+strings.Join(pauses, ","))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &devProcess{cmd: cmd, paused: make(chan string, 16), held: map[string]bool{}}
	t.Cleanup(p.kill)
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if f := strings.Fields(lines.Text()); len(f) >= 3 && f[0] == "Temporal" && f[1] == "gRPC" {
			p.address = f[2]
		}
		if f := strings.Fields(lines.Text()); len(f) >= 3 && f[0] == "HTTP" && f[1] == "API" {
			p.api = f[2]
		}
		if strings.HasPrefix(lines.Text(), "Try it") {
			break
		}
	}
	if p.address == "" {
		t.Fatalf("keel dev did not come up: %v", lines.Err())
	}
	go func() {
		// Read to the end, so keel dev never blocks on its output.
		for lines.Scan() {
			if point, ok := strings.CutPrefix(lines.Text(), devPausedLine+" "); ok {
				select {
				case p.paused <- point:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	return p
}

// waitPaused waits until p holds a call at point (in any order with the
// other points it holds calls at).
func (p *devProcess) waitPaused(t *testing.T, ctx context.Context, point string) {
	t.Helper()
	for !p.held[point] {
		select {
		case got := <-p.paused:
			t.Logf("keel dev holds a call at %s", got)
			p.held[got] = true
		case <-ctx.Done():
			t.Fatalf("keel dev never reached %s: %v", point, ctx.Err())
		}
	}
}

// kill sends SIGKILL and reaps the process.
func (p *devProcess) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// devKillRig is what the tests that kill -9 a `keel dev` share: its data
// directory and workspace (holding the 64 KiB big.txt that devKillScript
// reads), the content store under the data directory, opened by the test
// too, and a model that plays devKillScript.
type devKillRig struct {
	t         *testing.T
	ctx       context.Context
	data      string // keel dev's --data-dir
	workspace string // keel dev's --workspace, with big.txt
	storeDir  string // the content store, under data
	storeURL  string
	st        *store.Store // closed when the test ends
	codec     *store.Codec
	model     string // plays devKillScript
	// flags are more flags for keel dev (--config).
	flags []string
	// port is keel dev's gRPC port, the same at every start when set
	// (samePort), so a client dialled before a kill reaches the restarted
	// server; 0 is a free one each time.
	port int
}

// newDevKillRig skips the test in -short mode; else it makes the
// directories, big.txt, the script and the store, with a context (ctx)
// that ends after timeout or with the test. Nothing runs yet (start).
func newDevKillRig(t *testing.T, timeout time.Duration) *devKillRig {
	t.Helper()
	if testing.Short() {
		t.Skip("starts keel dev processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	dir := t.TempDir()
	r := &devKillRig{t: t, ctx: ctx, data: filepath.Join(dir, "data"), workspace: filepath.Join(dir, "workspace")}
	if err := os.MkdirAll(r.workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.workspace, "big.txt"), []byte(strings.Repeat("0123456789abcdef", 4096)), 0o600); err != nil {
		t.Fatal(err)
	}
	r.model = writeScript(t, devKillScript)
	r.storeDir = filepath.Join(r.data, "store")
	r.storeURL = "file://" + r.storeDir
	st, err := store.Open(ctx, r.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r.st = st
	r.codec = store.NewCodec(st, store.CodecOptions{})
	return r
}

// start runs `keel dev` on the rig's data directory and workspace,
// holding calls at pauses (envDevPause).
func (r *devKillRig) start(pauses ...string) *devProcess {
	r.t.Helper()
	return startDevProcess(r.t, r.data, r.workspace, r.port, pauses, r.flags...)
}

// samePort makes every start of keel dev listen on one gRPC port, chosen
// free now below the kernel's ephemeral range: a port from that range can
// be taken, while keel dev is down, as the local end of any outgoing
// connection on the machine, and the restart then finds it in use (a CI
// run saw it).
func (r *devKillRig) samePort() {
	r.t.Helper()
	below := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				below = n
			}
		}
	}
	for range 100 {
		port := 1024 + rand.IntN(below-1024)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		if err := l.Close(); err != nil {
			r.t.Fatal(err)
		}
		r.port = port
		return
	}
	r.t.Fatalf("no free port below %d", below)
}

// dial connects a client to p that reads and writes values through the
// rig's store and runs the rig's model with read_file.
func (r *devKillRig) dial(p *devProcess) *client.Client {
	r.t.Helper()
	c, err := client.Dial(r.ctx, client.Options{HostPort: p.address, DataConverter: store.NewDataConverter(r.codec),
		Config: api.RunConfig{Model: r.model, Tools: []string{"read_file"}}})
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// TestKillDevAcrossHandOvers kills -9 the whole `keel dev` at points where
// a session hands over (right after a run committed, which is when it
// writes its events to the store and continues as new) and where the
// content store is being written (a 64 KiB tool result in flight), then
// starts it again on the same data directory. Every prompt runs exactly
// once, every run has exactly one terminal event, the log stays dense from
// seq 1 across all executions, and every object in the store is intact.
func TestKillDevAcrossHandOvers(t *testing.T) {
	rig := newDevKillRig(t, 6*time.Minute)
	ctx := rig.ctx

	var prompts []string
	send := func(c *client.Client, opts ...client.SendOption) *client.Run {
		p := fmt.Sprintf("prompt %d", len(prompts)+1)
		run, err := c.Session("kill-dev").Send(ctx, p, opts...)
		if err != nil {
			t.Fatalf("send %q: %v", p, err)
		}
		prompts = append(prompts, p)
		return run
	}
	outcome := func(run *client.Run) {
		if _, err := run.Outcome(ctx); err != nil {
			t.Fatalf("run %s: %v", run.ID, err)
		}
	}
	// waitFor follows the run until an event of type typ.
	waitFor := func(run *client.Run, typ string) {
		for ev, err := range run.Events(ctx) {
			if err != nil {
				t.Fatalf("run %s: %v", run.ID, err)
			}
			if ev.Type == typ {
				return
			}
		}
		t.Fatalf("run %s ended without %s", run.ID, typ)
	}

	// settle waits for the runs the killed process left: each goes on to
	// its end on the new one.
	settle := func(c *client.Client) {
		sess := c.Session("kill-dev")
		for len(prompts) > 0 {
			st, err := sess.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// A run being started is active in the state before its
			// workflow is named (ActiveRun), so the state decides.
			if st.Runs == len(prompts) && !st.State.Active() && st.Queued == 0 {
				return
			}
			outcome(sess.Run(len(prompts)))
		}
	}

	kills := []struct {
		name string
		at   func(c *client.Client) // returns at the kill point
	}{
		{"after a commit (hand-over)", func(c *client.Client) { outcome(send(c)); outcome(send(c)) }},
		{"a tool result in flight (store write)", func(c *client.Client) { waitFor(send(c), keel.TypeToolStarted) }},
		{"a queued prompt carried over", func(c *client.Client) {
			run := send(c)
			send(c, client.Queue())
			outcome(run)
		}},
		{"the model turn after the tool (store write of its input)", func(c *client.Client) {
			waitFor(send(c), keel.TypeToolFinished)
		}},
	}
	p := rig.start()
	for _, k := range kills {
		c := rig.dial(p)
		settle(c)
		k.at(c)
		c.Close()
		p.kill()
		t.Logf("killed keel dev: %s (%d prompts sent)", k.name, len(prompts))
		p = rig.start()
	}
	c := rig.dial(p)
	defer c.Close()
	// Every run goes on to its end on the new process; one more run after.
	settle(c)
	outcome(send(c))
	sess := c.Session("kill-dev")
	state, err := sess.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if state.Runs != len(prompts) || state.HandOvers < 2 {
		t.Fatalf("state: %d runs (want %d), %d hand-overs (want at least 2)", state.Runs, len(prompts), state.HandOvers)
	}
	log, err := sess.EventsAfter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkDenseLog(t, log, prompts)
	if int64(len(log)) != state.LastSeq {
		t.Fatalf("log has %d events, state says %d", len(log), state.LastSeq)
	}
	checkStoreIntact(t, ctx, rig.st, rig.storeDir)
}

// checkDenseLog checks a session's log: dense from 1, each run one
// run.started and exactly one terminal event, and each prompt started
// exactly once.
func checkDenseLog(t *testing.T, log []keel.Envelope, prompts []string) {
	t.Helper()
	started := map[string]int{}
	terminals := map[string]int{}
	for i, ev := range log {
		if ev.Seq != int64(i+1) {
			t.Fatalf("log not dense: event %d has seq %d", i+1, ev.Seq)
		}
		if ev.Terminal() {
			terminals[ev.RunID]++
		}
		if ev.Type == keel.TypeRunStarted {
			e, err := ev.Event()
			if err != nil {
				t.Fatal(err)
			}
			started[e.(keel.RunStarted).Prompt]++
		}
	}
	for _, p := range prompts {
		if started[p] != 1 {
			t.Errorf("prompt %q started %d times", p, started[p])
		}
	}
	for run, n := range terminals {
		if n != 1 {
			t.Errorf("run %s has %d terminal events", run, n)
		}
	}
	if len(terminals) != len(prompts) {
		t.Errorf("%d runs ended, %d prompts sent", len(terminals), len(prompts))
	}
}

// checkStoreIntact reads back every object of a file store: a kill in the
// middle of a write must leave either no object or a whole one. A write
// goes to a temporary file that is renamed into place, so a kill during
// one leaves that file behind (never read, not an object).
func checkStoreIntact(t *testing.T, ctx context.Context, st *store.Store, dir string) {
	t.Helper()
	n, partial := 0, 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasSuffix(d.Name(), ".tmp") {
			partial++
			return nil
		}
		key, err := claimcheck.ParseKey("sha256:" + d.Name())
		if err != nil {
			return fmt.Errorf("%s is not an object of the store: %w", path, err)
		}
		if _, err := st.Get(ctx, key); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("the store holds no objects")
	}
	t.Logf("%d store objects intact; %d writes cut short by a kill left their temporary file", n, partial)
}
