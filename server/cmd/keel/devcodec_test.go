package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap/zapcore"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/connect"
)

// Readers find the codec endpoint of a keel dev on another --http-port by
// themselves: a run whose answer is over keel's 4 KiB claim-check
// threshold (docs/contract.md §16) is read back by keel run, keel events
// and keel history given no --codec-endpoint, and by a Go client dialled
// with no codec endpoint at all.
func TestReadersLearnTheCodecEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	t.Setenv(envCodecEndpoint, "")
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	stack, err := startDevStack(ctx, devConfig{scripts: testScripts(), noUI: true, workspace: t.TempDir(),
		logger: quietLogger(), logLevel: zapcore.ErrorLevel})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stack.stop() }()
	if stack.codecURL == defaultCodecEndpoint {
		t.Fatalf("the stack serves its codec endpoint on the default port; the test needs another")
	}

	answer := strings.Repeat("offloaded ", 600) // 6,000 bytes
	model := writeScript(t, `{"turns":[{"text":["`+answer+`"]}]}`)
	cli := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append([]string{args[0], "--address", stack.server.Address()}, args[1:]...)
		if code := dispatch(ctx, args, &out, &errOut); code != exitOK {
			t.Fatalf("keel %s: status %d\n%s\n%s", strings.Join(args, " "), code, out.String(), errOut.String())
		}
		return out.String()
	}
	for name, out := range map[string]string{
		"run":     cli("run", "--nats", "", "--session", "learn", "--model", model, "hi"),
		"events":  cli("events", "--nats", "", "learn", "--json"),
		"history": cli("history", "learn"),
	} {
		if !strings.Contains(out, answer) {
			t.Errorf("keel %s does not show the whole answer (%d bytes printed):\n%.300s", name, len(out), out)
		}
	}

	c, err := client.Dial(ctx, client.Options{HostPort: stack.server.Address(), Namespace: stack.server.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	evs, _, err := c.Session("learn").EventsPage(ctx, 0, 100)
	if err != nil {
		t.Fatalf("a client dialled without a codec endpoint: %v", err)
	}
	var text string
	for _, env := range evs {
		ev, err := env.Event()
		if err != nil {
			t.Fatal(err)
		}
		if done, ok := ev.(keel.RunCompleted); ok {
			text = done.Text
		}
	}
	if text != answer {
		t.Fatalf("the client read a final text of %d bytes, want the whole %d", len(text), len(answer))
	}
}

// What a server records is trusted only when it names this machine: a
// Temporal server on loopback recording a loopback http URL. Anything
// else, a server elsewhere could use to send a reader's payloads where it
// likes, so the reader keeps keel dev's default.
func TestLearnedCodecEndpointIsLoopbackOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stack, err := startDevStack(ctx, devConfig{scripts: testScripts(), noUI: true, workspace: t.TempDir(),
		logger: quietLogger(), logLevel: zapcore.ErrorLevel})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stack.stop() }()
	conn := connect.Options{HostPort: stack.server.Address(), Namespace: stack.server.Namespace(), IgnoreEnvironment: true}
	if got, err := client.LearnCodecEndpoint(ctx, conn, nil); err != nil || got != stack.codecURL {
		t.Fatalf("learned %q, %v; keel dev recorded %q", got, err, stack.codecURL)
	}
	for recorded, want := range map[string]string{
		"http://localhost:9999/codec":         "http://localhost:9999/codec",
		"http://[::1]:9999/codec":             "http://[::1]:9999/codec",
		"https://127.0.0.2:9999/codec":        "https://127.0.0.2:9999/codec",
		"http://collector.example.com/codec":  "",
		"http://10.0.0.5:7280/codec":          "",
		"http://127.0.0.1.example.com/codec":  "",
		"http://user:pw@127.0.0.1:7280/codec": "",
		"http://127.0.0.1:7280/codec?to=a.b":  "",
		"file:///etc/passwd":                  "",
		"127.0.0.1:7280/codec":                "",
		"":                                    "",
	} {
		_, err := stack.temporal.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
			Namespace:  stack.server.Namespace(),
			UpdateInfo: &namespacepb.UpdateNamespaceInfo{Data: map[string]string{client.CodecEndpointKey: recorded}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := client.LearnCodecEndpoint(ctx, conn, nil); err != nil || got != want {
			t.Errorf("recorded %q: learned %q, %v; want %q", recorded, got, err, want)
		}
	}
	// The same server reached through a non-loopback address is not
	// asked at all.
	remote := conn
	_, port, _ := net.SplitHostPort(conn.HostPort)
	remote.HostPort = net.JoinHostPort("192.0.2.1", port)
	if got, err := client.LearnCodecEndpoint(ctx, remote, nil); err != nil || got != "" {
		t.Errorf("a server at %s: learned %q, %v; want nothing, without a call", remote.HostPort, got, err)
	}
}
