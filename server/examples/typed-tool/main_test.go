package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// The example is built with go build and run as its own process against
// an embedded Temporal server, configured by a keel.yaml whose named
// scripted model calls the typed tool twice: once well, once with a unit
// the schema does not allow.
func TestTypedToolWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example and starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "typed-tool")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("turns.json", `{"turns":[
	  {"tool_calls":[
	    {"id":"c1","name":"convert_temperature","arguments":{"value":100,"from":"C","to":"F"}},
	    {"id":"c2","name":"convert_temperature","arguments":{"value":1,"from":"X","to":"C"}}]},
	  {"text":["100 °C is 212 °F."]}]}`)
	cfg := write("keel.yaml", "models:\n  script:\n    provider: scripted\n    model: turns.json\nworkspace: ws\ntools: [list_files]\n")

	srv := keeltest.StartServer(t, devserver.Config{})
	proc := exec.CommandContext(ctx, bin, "--address", srv.Address(), "--config", cfg)
	proc.Stderr = &testWriter{t}
	stdout, err := proc.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = proc.Process.Signal(syscall.SIGTERM)
		_ = proc.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "typed-tool: worker polling") {
				ready <- sc.Text()
			}
		}
		close(ready)
	}()
	select {
	case line, ok := <-ready:
		if !ok {
			t.Fatal("the worker exited before polling")
		}
		for _, name := range []string{"convert_temperature", "list_files"} {
			if !strings.Contains(line, name) {
				t.Errorf("the worker's tools %q lack %s", line, name)
			}
		}
		if strings.Contains(line, "write_file") {
			t.Errorf("the worker offers write_file, which keel.yaml did not enable: %q", line)
		}
	case <-ctx.Done():
		t.Fatal("the worker did not start polling")
	}

	tc, err := srv.Dial(ctx, sdkclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	kc, err := client.Dial(ctx, client.Options{Temporal: tc})
	if err != nil {
		t.Fatal(err)
	}
	sess := kc.NewSession()
	run, err := sess.Send(ctx, "What is 100 °C in °F?", client.WithConfig(api.RunConfig{
		Model: "script", Tools: []string{"convert_temperature"}}))
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Outcome(ctx)
	if err != nil || out.Status != keel.StatusCompleted {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	evs, err := sess.EventsAfter(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]keel.ToolFinished{}
	for _, env := range evs {
		if env.Type != keel.TypeToolFinished {
			continue
		}
		e, err := env.Event()
		if err != nil {
			t.Fatal(err)
		}
		f := e.(keel.ToolFinished)
		results[f.ToolCallID] = f
	}
	if r := results["c1"]; r.Status != keel.ToolOK || r.Output != "100 C = 212 F" {
		t.Errorf("c1: %s %q, want ok \"100 C = 212 F\"", r.Status, r.Output)
	}
	if r := results["c2"]; r.Status != keel.ToolError || !strings.Contains(r.Output, `invalid arguments for tool "convert_temperature"`) {
		t.Errorf("c2: %s %q, want an argument error from the schema", r.Status, r.Output)
	}
}

func TestConvertTemperature(t *testing.T) {
	for _, tc := range []struct {
		args convertArgs
		want string
	}{
		{convertArgs{100, "C", "F"}, "100 C = 212 F"},
		{convertArgs{32, "F", "C"}, "32 F = 0 C"},
		{convertArgs{0, "K", "C"}, "0 K = -273.15 C"},
	} {
		got, err := convertTemperature(context.Background(), tc.args)
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
	if _, err := convertTemperature(context.Background(), convertArgs{-500, "C", "K"}); err == nil {
		t.Error("below absolute zero: no error")
	}
}

// testWriter puts the worker's stderr in the test log.
type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
