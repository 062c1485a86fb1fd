package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel/client"
)

// `keel run --model X` runs X for that run only: a later send that names
// no model (as an HTTP send may) runs what it runs in a fresh session,
// until a `keel run --set-default` makes X the default (docs/contract.md
// §11.6).
func TestRunModelIsForItsRunOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	clearTemporalEnv(t)
	ctx, cancel := context.WithTimeout(withNoInput(context.Background()), 2*time.Minute)
	defer cancel()
	script := func(text string) string { return `{"repeat":true,"turns":[{"text":["` + text + `"]}]}` }
	srv := startWorkerWithConfig(t, ctx, map[string]string{
		"usual.json": script("The usual model."),
		"other.json": script("The other model."),
		"keel.yaml": "models:\n  usual:\n    provider: scripted\n    model: usual.json\n" +
			"  other:\n    provider: scripted\n    model: other.json\ndefault_model: usual\nworkspace: ./ws\n",
	})
	c, err := client.Dial(ctx, client.Options{HostPort: srv.Address()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	keelRun := func(args ...string) {
		t.Helper()
		args = append([]string{"run", "--address", srv.Address(), "--nats", "", "--session", "s1", "--tools", ""}, args...)
		code, out, errOut := keelCmd(ctx, args...)
		if code != exitOK || !strings.Contains(out, "The other model.") {
			t.Fatalf("keel %s: status %d, want 0 and the other model\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	send := func(session, want string) {
		t.Helper()
		run, err := c.Session(session).Send(ctx, "hi")
		if err != nil {
			t.Fatal(err)
		}
		out, err := run.Outcome(ctx)
		if err != nil || out.Text != want {
			t.Fatalf("a send without a model to %s: %q (%v), want %q", session, out.Text, err, want)
		}
	}
	// What a send without a model runs in a session of its own.
	first, err := c.Session("s0").Send(ctx, "hi")
	if err != nil {
		t.Fatal(err)
	}
	baseline, err := first.Outcome(ctx)
	if err != nil || baseline.Text == "" || baseline.Text == "The other model." {
		t.Fatalf("a fresh session's send without a model: %q (%v)", baseline.Text, err)
	}

	keelRun("--model", "other", "hi")
	send("s1", baseline.Text)
	keelRun("--model", "other", "--set-default", "hi")
	send("s1", "The other model.")

	// --once: run again under the same key (a client that does not know
	// whether its first try got through), it follows the first run and
	// starts nothing (docs/contract.md §11.7).
	keelRun("--model", "other", "--once", "k1", "again")
	keelRun("--model", "other", "--once", "k1", "again")
	st, err := c.Session("s1").State(ctx)
	if err != nil || st.Runs != 5 {
		t.Fatalf("after two keel run --once with one key: %d runs (%v), want 5", st.Runs, err)
	}
}
