package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/live"
	"github.com/keelrun/keel/logging"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/scripted"
	"github.com/keelrun/keel/server/tool"
	"github.com/keelrun/keel/server/worker"
)

// A keel worker that the tests can kill -9 must live in its own OS process:
// the test binary runs itself again with -test.run selecting
// TestHelperWorkerProcess and the worker's settings in workerSpecEnv.

// workerSpecEnv carries a workerSpec, as JSON, to the worker process.
const workerSpecEnv = "KEEL_E2E_WORKER_SPEC"

// workerReadyLine is what the worker process prints on stdout once it polls.
const workerReadyLine = "keel-e2e-worker-ready"

// workerSpec says which server a worker process serves and with what.
type workerSpec struct {
	Address   string `json:"address"`
	Namespace string `json:"namespace"`
	// Script is the scripted provider's script file; every model spec
	// plays it.
	Script    string `json:"script"`
	Workspace string `json:"workspace"`
	// NATSURL is the live channel deltas go to; none when empty.
	NATSURL string `json:"nats_url,omitempty"`
	// TallyLog is where the tally tool appends one line per execution.
	TallyLog string `json:"tally_log"`
	// Generation numbers the worker processes of a test, so tally lines
	// say which process ran a call.
	Generation int `json:"generation"`
	// StickyTimeout is the worker's StickyScheduleToStartTimeout: how long
	// a workflow task waits for the killed worker that had the workflow
	// cached before any worker may take it. Default Temporal's, 5 s.
	StickyTimeout time.Duration `json:"sticky_timeout,omitempty"`
	// HookHold makes the guard hook (guardHook) hold its call, once its
	// effect is tallied, until the process is killed.
	HookHold bool `json:"hook_hold,omitempty"`
}

// TestHelperWorkerProcess is not a test: it is the body of a worker process
// started by startWorkerProcess, and skips in a normal test run.
func TestHelperWorkerProcess(t *testing.T) {
	raw := os.Getenv(workerSpecEnv)
	if raw == "" {
		t.Skip("runs only inside a worker process started by the e2e tests")
	}
	if err := serveWorker(raw); err != nil {
		fmt.Fprintln(os.Stderr, "worker process:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// serveWorker runs a keel worker until stdin closes: the parent holds the
// other end, so a worker whose test is gone (even killed) exits too.
func serveWorker(raw string) error {
	var spec workerSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	script, err := scripted.Load(spec.Script)
	if err != nil {
		return err
	}
	tools, err := tool.Builtins(spec.Workspace)
	if err != nil {
		return err
	}
	if err := tools.Register(tallyTool(spec.TallyLog, spec.Generation)); err != nil {
		return err
	}
	logger := logging.Default()
	c, err := sdkclient.Dial(sdkclient.Options{
		HostPort: spec.Address, Namespace: spec.Namespace, Logger: logging.Temporal(logger),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	opts := worker.Options{
		Models: scriptModels{scripted.New(script)}, Tools: tools, Logger: logger, StopTimeout: time.Second,
		Hooks: map[string]hook.Hook{"guard": guardHook(spec.TallyLog, spec.Generation, spec.HookHold)},
	}
	opts.Worker.StickyScheduleToStartTimeout = spec.StickyTimeout
	if spec.NATSURL != "" {
		ch, err := live.DialNATS(spec.NATSURL, live.NATSOptions{})
		if err != nil {
			return err
		}
		defer ch.Close()
		opts.Live = ch
	}
	w, err := worker.New(c, opts)
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	fmt.Println(workerReadyLine)
	_, _ = io.Copy(io.Discard, os.Stdin)
	w.Stop()
	return nil
}

// scriptModels resolves every model spec to one script.
type scriptModels struct{ p provider.Provider }

func (m scriptModels) Resolve(string) (provider.Provider, string, error) { return m.p, "scripted", nil }

// tallyArgs are the tally tool's arguments. HoldMS keeps the call running
// between its two log lines, so a kill can land while it is in flight.
type tallyArgs struct {
	Label  string `json:"label"`
	HoldMS int    `json:"hold_ms,omitempty"`
	// HoldGen limits HoldMS to the worker process of that generation.
	HoldGen int `json:"hold_gen,omitempty"`
}

// tallyLine is one line of the tally log.
type tallyLine struct {
	Phase      string `json:"phase"` // "start" or "end"
	Key        string `json:"key"`
	RunID      string `json:"run_id"`
	ToolCallID string `json:"tool_call_id"`
	Attempt    int    `json:"attempt"`
	Generation int    `json:"generation"`
	Label      string `json:"label"`
}

// tallyTool is a tool with an observable, non-idempotent side effect: every
// execution appends to a log, so the tests can count how often each call
// really ran and with which idempotency key.
func tallyTool(path string, generation int) tool.Tool {
	return tool.New("tally", "Count something once.", func(ctx context.Context, a tallyArgs) (string, error) {
		info := tool.Info(ctx)
		line := tallyLine{Key: info.IdempotencyKey, RunID: info.RunID, ToolCallID: info.ToolCallID, Attempt: info.Attempt,
			Generation: generation, Label: a.Label}
		line.Phase = "start"
		if err := appendTally(path, line); err != nil {
			return "", err
		}
		if a.HoldMS > 0 && (a.HoldGen == 0 || a.HoldGen == generation) {
			select {
			case <-time.After(time.Duration(a.HoldMS) * time.Millisecond):
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		line.Phase = "end"
		if err := appendTally(path, line); err != nil {
			return "", err
		}
		return "counted " + a.Label, nil
	})
}

// guardHook is a before_tool hook with an effect outside the worker, made
// once per call key as a hook should: it tallies "hook" with the call's
// key and answers a replace of the tally call's label (label+"-guarded",
// and the arguments it had); asked again under a key it tallied, it
// tallies "hook-again" and answers the same without a second effect. With
// hold it then holds the call until the process dies, so a kill lands
// after its effect and before the worker reports its answer.
func guardHook(path string, generation int, hold bool) hook.Hook {
	spec := hook.Spec{Points: []keel.HookPoint{keel.HookBeforeTool}, Timeout: keel.Duration(time.Minute)}
	return hook.Func(spec, func(ctx context.Context, c hook.Call) (hook.Decision, error) {
		var a tallyArgs
		if err := json.Unmarshal(c.Tool.Arguments, &a); err != nil {
			return hook.Decision{}, err
		}
		a.Label += "-guarded"
		args, err := json.Marshal(a)
		if err != nil {
			return hook.Decision{}, err
		}
		lines, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return hook.Decision{}, err
		}
		phase := "hook"
		if strings.Contains(string(lines), `"phase":"hook","key":"`+c.Key+`"`) {
			phase = "hook-again"
		}
		if err := appendTally(path, tallyLine{Phase: phase, Key: c.Key, RunID: c.RunID, ToolCallID: c.Tool.ID,
			Generation: generation, Label: a.Label}); err != nil {
			return hook.Decision{}, err
		}
		if hold {
			<-ctx.Done()
			return hook.Decision{}, ctx.Err()
		}
		return hook.Decision{Action: keel.HookReplace, Arguments: args}, nil
	})
}

// appendTally appends one JSON line. O_APPEND writes of a short line are
// atomic, so concurrent calls and processes never interleave.
func appendTally(path string, line tallyLine) error {
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readTally returns the tally log's lines; a missing log has none.
func readTally(t *testing.T, path string) []tallyLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatalf("tally log: %v", err)
	}
	var out []tallyLine
	for _, s := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if s == "" {
			continue
		}
		var l tallyLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("tally line %q: %v", s, err)
		}
		out = append(out, l)
	}
	return out
}

// workerProcess is a running worker process.
type workerProcess struct {
	t       *testing.T
	gen     int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	logPath string
	exited  chan struct{} // closed once the process was reaped
	waitErr error
}

// startWorkerProcess starts a worker process and returns once it polls. It
// is stopped (stdin closed, then killed if it lingers) when t ends.
func startWorkerProcess(t *testing.T, spec workerSpec) *workerProcess {
	t.Helper()
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	p := &workerProcess{t: t, gen: spec.Generation, exited: make(chan struct{}),
		logPath: filepath.Join(t.TempDir(), fmt.Sprintf("worker-%d.log", spec.Generation))}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperWorkerProcess$")
	p.cmd.Env = append(os.Environ(), workerSpecEnv+"="+string(raw))
	p.cmd.Stderr = logFile
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	defer func() { t.Logf("worker process %d ready in %v", p.gen, time.Since(began).Round(time.Millisecond)) }()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start worker process: %v", err)
	}
	ready := make(chan struct{})
	var readyOnce sync.Once
	var pipes sync.WaitGroup
	pipes.Add(1)
	go func() {
		defer pipes.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == workerReadyLine {
				readyOnce.Do(func() { close(ready) })
				continue
			}
			fmt.Fprintln(logFile, sc.Text())
		}
	}()
	go func() {
		pipes.Wait() // Wait must not close stdout before it is drained
		p.waitErr = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			p.dumpLog()
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		p.dumpLog()
		t.Fatalf("worker process %d exited before it was ready: %v", p.gen, p.waitErr)
	case <-time.After(2 * time.Minute):
		t.Fatalf("worker process %d not ready after 2 minutes", p.gen)
	}
	return p
}

// kill sends SIGKILL, as kill -9 does, and waits until the process is gone,
// so nothing of it runs once kill returns.
func (p *workerProcess) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("kill worker process %d: %v", p.gen, err)
	}
	<-p.exited
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		p.t.Fatalf("worker process %d ended with %v before it was killed", p.gen, p.cmd.ProcessState)
	}
}

func (p *workerProcess) dumpLog() {
	data, err := os.ReadFile(p.logPath)
	if err != nil || len(data) == 0 {
		return
	}
	const max = 8 << 10
	if len(data) > max {
		data = data[len(data)-max:]
	}
	p.t.Logf("worker process %d log (tail):\n%s", p.gen, data)
}
