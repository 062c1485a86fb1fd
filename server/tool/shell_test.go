//go:build linux

package tool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func newShell(t *testing.T, cfg ShellConfig) Tool {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	sh, err := Shell(cfg)
	must(t, err)
	return sh
}

func TestShell(t *testing.T) {
	sh := newShell(t, ShellConfig{Allow: []string{"echo", "sh", "pwd", "no-such-program-keel"}})
	tests := []struct {
		name string
		argv []string
		want Result
	}{
		{"runs", []string{"echo", "hello"}, Result{Output: "hello\n[exit status 0]"}},
		{"no shell interpretation", []string{"echo", "$HOME", "*", "|", ";", "rm"},
			Result{Output: "$HOME * | ; rm\n[exit status 0]"}},
		{"exit status", []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, fail("out\nerr\n[exit status 3]")},
		{"killed by a signal", []string{"sh", "-c", "kill -TERM $$"}, fail("[signal: terminated]")},
		{"no output", []string{"sh", "-c", "true"}, Result{Output: "[exit status 0]"}},
		{"output without newline", []string{"sh", "-c", "printf x"}, Result{Output: "x\n[exit status 0]"}},
		{"not allowed", []string{"rm", "-rf", "/"}, fail(`"rm" is not allowed; allowed programs: echo, no-such-program-keel, pwd, sh`)},
		{"a path is not a name", []string{"/bin/echo", "hi"},
			fail(`"/bin/echo" is not allowed; allowed programs: echo, no-such-program-keel, pwd, sh`)},
		{"allowed but missing", []string{"no-such-program-keel"},
			fail(`cannot run "no-such-program-keel": exec: "no-such-program-keel": executable file not found in $PATH`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := call(t, sh, ShellArgs{Argv: tt.argv})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("shell (-want +got):\n%s", diff)
			}
		})
	}

	got := call(t, sh, map[string]any{"argv": []string{}})
	if diff := cmp.Diff(fail(`invalid arguments for tool "shell": at /argv: minItems: got 0, want 1`), got); diff != "" {
		t.Errorf("empty argv (-want +got):\n%s", diff)
	}
}

func TestShellRunsInDir(t *testing.T) {
	dir := t.TempDir()
	sh := newShell(t, ShellConfig{Dir: dir, Allow: []string{"pwd"}})
	got := call(t, sh, ShellArgs{Argv: []string{"pwd"}})
	resolved, err := filepath.EvalSymlinks(dir)
	must(t, err)
	if diff := cmp.Diff(Result{Output: resolved + "\n[exit status 0]"}, got); diff != "" {
		t.Errorf("pwd (-want +got):\n%s", diff)
	}
}

// The worker's environment holds API keys; commands must not see it.
func TestShellEnvironmentIsMinimal(t *testing.T) {
	t.Setenv("KEEL_TEST_API_KEY", "sk-secret")
	sh := newShell(t, ShellConfig{Allow: []string{"env"}})
	got := call(t, sh, ShellArgs{Argv: []string{"env"}})
	if strings.Contains(got.Output, "sk-secret") || !strings.Contains(got.Output, "PATH=") {
		t.Errorf("env output:\n%s\nwant PATH and no API key", got.Output)
	}

	sh = newShell(t, ShellConfig{Allow: []string{"env"}, Env: []string{"ONLY=this"}})
	got = call(t, sh, ShellArgs{Argv: []string{"env"}})
	if diff := cmp.Diff(Result{Output: "ONLY=this\n[exit status 0]"}, got); diff != "" {
		t.Errorf("env with Env set (-want +got):\n%s", diff)
	}
}

func TestShellOutputCap(t *testing.T) {
	sh := newShell(t, ShellConfig{Allow: []string{"sh"}, MaxOutput: 20})
	tests := []struct {
		name   string
		script string
		want   Result
	}{
		{"under the cap", "printf 0123456789", Result{Output: "0123456789\n[exit status 0]"}},
		{"exactly the cap", "printf 0123456789abcdefghij", Result{Output: "0123456789abcdefghij\n[exit status 0]"}},
		{"over the cap keeps start and end", "printf 0123456789; printf %0100d 0; printf abcdefghij",
			Result{Output: "0123456789\n[... 100 bytes of output omitted ...]\nabcdefghij\n[exit status 0]"}},
		{"many small writes", "for i in $(seq 1 500); do echo line$i; done",
			Result{Output: "line1\nline\n[... 3872 bytes of output omitted ...]\n9\nline500\n[exit status 0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := call(t, sh, ShellArgs{Argv: []string{"sh", "-c", tt.script}})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("shell (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShellTimeoutKillsProcessGroup(t *testing.T) {
	sh := newShell(t, ShellConfig{Allow: []string{"sh"}, Timeout: 300 * time.Millisecond})
	start := time.Now()
	// The child sleep would hold the output pipe for a minute if it
	// survived its group.
	got := call(t, sh, ShellArgs{Argv: []string{"sh", "-c", "sleep 60 & echo $!; wait"}})
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Errorf("call took %v", elapsed)
	}
	pid, rest, _ := strings.Cut(got.Output, "\n")
	if diff := cmp.Diff(fail("[killed: timed out after 300ms]"), Result{Output: rest, IsError: got.IsError}); diff != "" {
		t.Errorf("shell (-want +got):\n%s", diff)
	}
	requireExited(t, pid)
}

func TestShellCancelKillsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pid")
	must(t, syscall.Mkfifo(fifo, 0o600))
	sh := newShell(t, ShellConfig{Dir: dir, Allow: []string{"sh"}, Timeout: time.Hour})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := sh.Call(ctx, json.RawMessage(`{"argv":["sh","-c","sleep 60 & echo $! > pid; wait"]}`))
		done <- outcome{res, err}
	}()
	// Reading the FIFO blocks until the command wrote its child's pid: the
	// command is then surely running.
	pids := make(chan string, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			pids <- ""
			return
		}
		defer f.Close()
		line, _ := bufio.NewReader(f).ReadString('\n')
		pids <- strings.TrimSpace(line)
	}()
	var pid string
	select {
	case pid = <-pids:
	case o := <-done:
		t.Fatalf("call ended before the command started: %+v, %v", o.res, o.err)
	}
	cancel()
	o := <-done
	if !errors.Is(o.err, context.Canceled) {
		t.Errorf("Call = %+v, %v; want context.Canceled", o.res, o.err)
	}
	requireExited(t, pid)
}

// A command that exits leaving background processes behind has them killed.
func TestShellKillsLeftovers(t *testing.T) {
	sh := newShell(t, ShellConfig{Allow: []string{"sh"}})
	got := call(t, sh, ShellArgs{Argv: []string{"sh", "-c", "sleep 60 & echo $!"}})
	pid, rest, _ := strings.Cut(got.Output, "\n")
	if diff := cmp.Diff(Result{Output: "[exit status 0; the processes it left running were killed]"}, Result{Output: rest, IsError: got.IsError}); diff != "" {
		t.Errorf("shell (-want +got):\n%s", diff)
	}
	requireExited(t, pid)
}

// requireExited waits (through a pidfd, without polling) until the process
// has exited, failing if it is still alive after a generous bound.
func requireExited(t *testing.T, pidText string) {
	t.Helper()
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		t.Fatalf("bad pid %q", pidText)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return // gone and reaped
	}
	if errors.Is(err, unix.ENOSYS) {
		t.Skip("pidfd_open not supported")
	}
	must(t, err)
	defer unix.Close(fd)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10_000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		must(t, err)
		if n == 0 {
			t.Errorf("process %d still runs 10s after the call returned", pid)
		}
		return
	}
}

func TestShellConfigErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	must(t, os.WriteFile(file, nil, 0o644))
	tests := []struct {
		name string
		cfg  ShellConfig
		want string
	}{
		{"no dir", ShellConfig{Allow: []string{"ls"}}, "tool: shell: Dir is required"},
		{"missing dir", ShellConfig{Dir: filepath.Join(t.TempDir(), "x"), Allow: []string{"ls"}}, "is not a directory"},
		{"file as dir", ShellConfig{Dir: file, Allow: []string{"ls"}}, "is not a directory"},
		{"empty allow-list", ShellConfig{Dir: t.TempDir()}, "tool: shell: Allow is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Shell(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Shell error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestShellTraits(t *testing.T) {
	sh := newShell(t, ShellConfig{Allow: []string{"ls"}, Timeout: 5 * time.Minute})
	if got := TraitsOf(sh).Timeout.Std(); got <= 5*time.Minute {
		t.Errorf("activity timeout %v, want more than the command timeout", got)
	}
}
