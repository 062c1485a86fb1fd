package interrupt

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFirstSignalCancels(t *testing.T) {
	ctx, stop := Context("test", 3)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGINT did not cancel the context")
	}
}

// The child half of TestSecondSignalExits: it waits for its context to
// end, says so, and then waits for the second signal to end the process.
func TestMain(m *testing.M) {
	if os.Getenv("INTERRUPT_CHILD") == "1" {
		ctx, _ := Context("child", 3)
		os.Stdout.WriteString("ready\n")
		<-ctx.Done()
		os.Stdout.WriteString("cancelled\n")
		select {}
	}
	os.Exit(m.Run())
}

func TestSecondSignalExits(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "INTERRUPT_CHILD=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("child printed %q, want %q", lines.Text(), want)
		}
	}
	expect("ready")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	expect("cancelled")
	_ = cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("child ended with %v, want exit status 3", err)
	}
	if !strings.Contains(stderr.String(), "child: interrupted again, exiting now") {
		t.Errorf("child's stderr: %q", stderr.String())
	}
}
