//go:build !unix

package tool

import "os/exec"

// Without process groups, cancellation kills the command's process only
// (exec's default).
func killGroupOnCancel(*exec.Cmd) {}

func killGroup(*exec.Cmd) bool { return false }
