package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/keelrun/keel/internal/syncbuf"
)

// childStopTimeout bounds how long a child worker may take to stop after
// SIGINT before it is killed.
const childStopTimeout = 15 * time.Second

// child is a worker in a child process: this binary, re-executed.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{}
	stderr *syncbuf.Buffer
}

// startLatencyWorker re-executes this binary as `keel-bench worker
// --noop-tool` against the bench's server and NATS, offering the scripts
// of dir, and returns once it polls, with a function that stops it
// (bench.Options.WorkerProcess).
func startLatencyWorker(ctx context.Context, address, namespace, natsURL, dir string) (stop func(), err error) {
	ws, err := os.MkdirTemp(dir, "workspace-")
	if err != nil {
		return nil, err
	}
	w, err := startChild(ctx, workerReady, "worker", "--address", address, "--namespace", namespace, "--nats", natsURL,
		"--workspace", filepath.Clean(ws), "--scripts", dir, "--stop-timeout", "1s", "--noop-tool")
	if err != nil {
		return nil, err
	}
	return w.stop, nil
}

// startChild re-executes this binary with args and returns once a line of
// its standard output starts with ready.
func startChild(ctx context.Context, ready string, args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary to run a worker process: %w", err)
	}
	cmd := exec.Command(exe, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w := &child{cmd: cmd, exited: make(chan struct{}), stderr: &syncbuf.Buffer{}}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a worker process: %w", err)
	}
	polling := make(chan struct{})
	go func() {
		// The worker says it polls on its first line; the rest is drained
		// so the child never blocks on a full pipe.
		sc := bufio.NewScanner(stdout)
		once := sync.OnceFunc(func() { close(polling) })
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), ready) {
				once()
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(w.exited)
	}()
	select {
	case <-polling:
		return w, nil
	case <-w.exited:
		return nil, fmt.Errorf("the worker process exited (%v): %s", cmd.ProcessState, strings.TrimSpace(w.stderr.String()))
	case <-ctx.Done():
		w.stop()
		return nil, ctx.Err()
	}
}

// stop asks the child to stop as Ctrl-C would, and kills it if it does not.
func (w *child) stop() {
	if err := w.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		_ = w.cmd.Process.Kill()
	}
	select {
	case <-w.exited:
	case <-time.After(childStopTimeout):
		_ = w.cmd.Process.Kill()
		<-w.exited
	}
}
