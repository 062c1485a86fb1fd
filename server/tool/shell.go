package tool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults of ShellConfig.
const (
	DefaultShellTimeout   = 2 * time.Minute
	DefaultShellMaxOutput = 64 << 10
)

// ShellConfig configures the shell tool.
type ShellConfig struct {
	// Dir is the working directory of every command. Required.
	Dir string
	// Allow lists the programs the model may run, matched exactly against
	// argv[0] ("go", "git"), then looked up in the worker's PATH. Required:
	// there is no way to allow everything.
	Allow []string
	// Timeout bounds each command; the command's whole process group is
	// killed when it expires. Zero means DefaultShellTimeout.
	Timeout time.Duration
	// MaxOutput caps the combined stdout and stderr returned to the model;
	// the middle of a longer output is cut out, keeping its start and end.
	// Zero means DefaultShellMaxOutput.
	MaxOutput int
	// Env is the commands' environment. Nil means a minimal one (PATH,
	// HOME, TMPDIR, LANG and USER from the worker's): the worker's own
	// environment holds API keys, which must not reach the model.
	Env []string
}

// ShellArgs are the arguments of the shell tool.
type ShellArgs struct {
	Argv []string `json:"argv" jsonschema:"minItems=1,description=The program and its arguments. It runs without a shell: no pipes\\, globs\\, redirection or variable expansion."`
}

// Shell returns the shell tool, which runs a command given as an argv
// array, without shell interpretation, if argv[0] is in cfg.Allow. It
// returns the combined output (capped) and the exit status; a non-zero
// status or a timeout is an error result. When the command times out or the
// call is cancelled, its whole process group is killed. Shell is never
// among the built-ins: register it explicitly.
func Shell(cfg ShellConfig) (Tool, error) {
	if cfg.Dir == "" {
		return nil, errors.New("tool: shell: Dir is required")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("tool: shell: %w", err)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("tool: shell: Dir %q is not a directory", cfg.Dir)
	}
	cfg.Dir = dir
	if len(cfg.Allow) == 0 {
		return nil, errors.New("tool: shell: Allow is empty; list the programs the model may run")
	}
	cfg.Allow = slices.Sorted(slices.Values(cfg.Allow))
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultShellTimeout
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultShellMaxOutput
	}
	if cfg.Env == nil {
		cfg.Env = minimalEnv()
	}
	s := &shell{cfg: cfg}
	desc := fmt.Sprintf("Run a program in the workspace and return its output and exit status. "+
		"Allowed programs: %s. Commands are killed after %s.", strings.Join(cfg.Allow, ", "), cfg.Timeout)
	// The activity's own timeout leaves room to kill and report.
	return New("shell", desc, s.run, WithTimeout(cfg.Timeout+time.Minute)), nil
}

func minimalEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "LANG", "USER"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

type shell struct{ cfg ShellConfig }

func (s *shell) run(ctx context.Context, args ShellArgs) (string, error) {
	name := args.Argv[0]
	if _, ok := slices.BinarySearch(s.cfg.Allow, name); !ok {
		return "", Failf("%q is not allowed; allowed programs: %s", name, strings.Join(s.cfg.Allow, ", "))
	}
	runCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, name, args.Argv[1:]...)
	cmd.Dir = s.cfg.Dir
	cmd.Env = s.cfg.Env
	killGroupOnCancel(cmd)
	out, err := runCapped(cmd, s.cfg.MaxOutput)
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	text := out.output
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	var exitErr *exec.ExitError
	switch {
	case runCtx.Err() != nil:
		return "", Failf("%s[killed: timed out after %s]", text, s.cfg.Timeout)
	case err == nil && out.leftovers:
		return text + "[exit status 0; the processes it left running were killed]", nil
	case err == nil:
		return text + "[exit status 0]", nil
	case errors.As(err, &exitErr) && exitErr.ExitCode() >= 0:
		return "", Failf("%s[exit status %d]", text, exitErr.ExitCode())
	case errors.As(err, &exitErr):
		return "", Failf("%s[%s]", text, exitErr.ProcessState)
	default:
		return "", Failf("cannot run %q: %v", name, err)
	}
}

type cappedRun struct {
	output    string
	leftovers bool // processes of the command's group outlived it and were killed
}

// runCapped runs cmd with stdout and stderr on one pipe, read into a
// cappedOutput. It owns the pipe (rather than letting exec copy) so that
// it can kill the process group as soon as the command exits: background
// children holding the pipe open would otherwise hold the call.
func runCapped(cmd *exec.Cmd, maxOutput int) (cappedRun, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return cappedRun{}, err
	}
	defer pr.Close()
	cmd.Stdout, cmd.Stderr = pw, pw
	err = cmd.Start()
	pw.Close() // the child has its own copy; EOF comes when every holder is gone
	if err != nil {
		return cappedRun{}, err
	}
	out := &cappedOutput{max: maxOutput}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, pr)
	}()
	err = cmd.Wait()
	leftovers := killGroup(cmd)
	select {
	case <-copied:
	case <-time.After(pipeGrace):
		// A process outside the group (it called setsid) still holds the
		// pipe; stop reading rather than wait for it.
		pr.Close()
		<-copied
	}
	return cappedRun{output: out.String(), leftovers: leftovers}, err
}

// pipeGrace is how long output is still read after the command's process
// group is gone.
const pipeGrace = 2 * time.Second

// cappedOutput keeps the first and last max/2 bytes written to it.
type cappedOutput struct {
	max   int
	head  []byte
	tail  []byte
	total int
}

func (c *cappedOutput) Write(p []byte) (int, error) {
	c.total += len(p)
	rest := p
	if room := c.max/2 - len(c.head); room > 0 {
		n := min(room, len(rest))
		c.head = append(c.head, rest[:n]...)
		rest = rest[n:]
	}
	keep := c.max - c.max/2
	c.tail = append(c.tail, rest...)
	if len(c.tail) > 2*keep { // trim now and then, not on every write
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-keep:]...)
	}
	return len(p), nil
}

func (c *cappedOutput) String() string {
	keep := c.max - c.max/2
	tail := c.tail
	if len(tail) > keep {
		tail = tail[len(tail)-keep:]
	}
	omitted := c.total - len(c.head) - len(tail)
	if omitted == 0 {
		return string(c.head) + string(tail)
	}
	return fmt.Sprintf("%s\n[... %d bytes of output omitted ...]\n%s", c.head, omitted, tail)
}
