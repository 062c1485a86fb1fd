//go:build unix

package tool

import (
	"os/exec"
	"syscall"
)

// killGroupOnCancel starts the command in its own process group and makes
// cancellation kill the whole group, so that a command's children (a test
// binary under "go test", a server under a script) die with it.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// killGroup kills what is left of the command's process group after the
// command exited, and reports whether anything was.
func killGroup(cmd *exec.Cmd) bool {
	if cmd.Process == nil {
		return false
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) == nil
}
