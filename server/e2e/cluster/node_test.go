package cluster_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelrun/keel/internal/syncbuf"
)

// node is one OS process of the cluster, started again with the same
// command line after a kill (as a supervisor would).
type node struct {
	name  string
	ready string // a line of stdout holding this says it serves
	env   []string
	args  []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	exited chan struct{}
}

// startNode starts args[0] with args[1:] and returns once a line of its
// stdout contains ready.
func startNode(t *testing.T, name, ready string, env []string, args ...string) *node {
	t.Helper()
	n := &node{name: name, ready: ready, env: env, args: args}
	t.Cleanup(func() {
		n.kill()
		if t.Failed() || os.Getenv("KEEL_CLUSTER_STDERR") != "" {
			t.Logf("%s stderr (last 4 KiB):\n%s", n.name, tail(n.stderrText(), 4096))
		}
	})
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *node) start() error {
	cmd := exec.Command(n.args[0], n.args[1:]...)
	cmd.Env = append(os.Environ(), n.env...)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.stderr, n.exited = cmd, stderr, exited
	n.mu.Unlock()
	ready := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if strings.Contains(lines.Text(), n.ready) {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case <-ready:
		return nil
	case <-exited:
		return fmt.Errorf("%s did not come up: %v\n%s", n.name, cmd.ProcessState, tail(stderr.String(), 4096))
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		return fmt.Errorf("%s did not come up in 3 minutes\n%s", n.name, tail(stderr.String(), 4096))
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (n *node) kill() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// restart starts the process again after a kill.
func (n *node) restart(t *testing.T) {
	t.Helper()
	if err := n.start(); err != nil {
		t.Fatal(err)
	}
}

// pid is the running process's ID.
func (n *node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.Process.Pid
}

// alive reports an error if the process has exited.
func (n *node) alive() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.exited:
		return fmt.Errorf("%s exited: %v\n%s", n.name, n.cmd.ProcessState, tail(n.stderr.String(), 4096))
	default:
		return nil
	}
}

func (n *node) stderrText() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stderr == nil {
		return ""
	}
	return n.stderr.String()
}

func tail(s string, max int) string {
	if len(s) > max {
		return s[len(s)-max:]
	}
	return s
}
