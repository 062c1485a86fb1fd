package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/config"
	"github.com/keelrun/keel/server/hook"
	"github.com/keelrun/keel/server/worker"
)

const hooksYAML = `
hooks:
  audit:
    url: URL/hook
    secret_env: KEEL_TEST_AUDIT_SECRET
    points: [before_tool, after_tool]
    timeout: 3s
    on_error: continue
  gate:
    url: https://hooks.example.com/keel
    secret_env: KEEL_TEST_GATE_SECRET
    points: [run_start]
sinks:
  archive:
    url: URL/sink
    secret_env: KEEL_TEST_SINK_SECRET
    timeout: 2s
agents:
  coder:
    instructions: Write the code.
    hooks: [audit, gate]
`

// signedEcho answers every POST whose signature verifies with secret: a
// deny to a hook call, 204 to a delivery. got receives each request's
// path.
func signedEcho(t *testing.T, secret string, got chan<- string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := hook.Verify([]byte(secret), r.Header.Get(hook.SignatureHeader), body, time.Now(), 0); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		got <- r.URL.Path
		if r.URL.Path == "/hook" {
			_, _ = io.WriteString(w, `{"action":"deny","reason":"audited"}`)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// docs/contract.md §23: keel.yaml's hooks and sinks reach the worker's
// options, beside a program's own, signing with the secrets their
// variables hold; an agent's hooks reach its spec.
func TestHooksFromFile(t *testing.T) {
	const secret = "audit-secret-value"
	t.Setenv("KEEL_TEST_AUDIT_SECRET", secret)
	t.Setenv("KEEL_TEST_GATE_SECRET", "gate-secret-value")
	t.Setenv("KEEL_TEST_SINK_SECRET", secret)
	paths := make(chan string, 2)
	srv := signedEcho(t, secret, paths)
	cfg, err := config.Parse("keel.yaml", []byte(strings.ReplaceAll(hooksYAML, "URL", srv.URL)))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.AgentSpecs()["coder"].Hooks; !cmp.Equal(got, []string{"audit", "gate"}) {
		t.Errorf("coder's hooks = %v", got)
	}
	own := hook.Func(hook.Spec{Points: []keel.HookPoint{keel.HookRunEnd}}, func(context.Context, hook.Call) (hook.Decision, error) {
		return hook.Decision{}, nil
	})
	opts := worker.Options{Workspace: t.TempDir(), Hooks: map[string]hook.Hook{"own": own}}
	if err := cfg.Apply(&opts); err != nil {
		t.Fatal(err)
	}
	if len(opts.Hooks) != 3 || opts.Hooks["own"] == nil || len(opts.Sinks) != 1 {
		t.Fatalf("Apply: hooks %v, sinks %v; want own, audit, gate and archive", opts.Hooks, opts.Sinks)
	}
	wantSpec := hook.Spec{Points: []keel.HookPoint{keel.HookBeforeTool, keel.HookAfterTool},
		Timeout: keel.Duration(3 * time.Second), OnError: hook.OnErrorContinue}
	if diff := cmp.Diff(wantSpec, opts.Hooks["audit"].Spec()); diff != "" {
		t.Errorf("audit's spec (-want +got):\n%s", diff)
	}
	d, err := opts.Hooks["audit"].Call(context.Background(), hook.Call{Hook: "audit", Point: keel.HookBeforeTool, Key: "k"})
	if err != nil || d.Action != keel.HookDeny {
		t.Errorf("audit's call: %+v, %v; want the endpoint's deny", d, err)
	}
	ev := keel.Envelope{Seq: 1, Type: keel.TypeRunCompleted, SessionID: "s", Data: json.RawMessage(`{}`)}
	if err := opts.Sinks["archive"].Deliver(context.Background(), "s", []keel.Envelope{ev}); err != nil {
		t.Errorf("archive's delivery: %v", err)
	}
	if a, b := <-paths, <-paths; a != "/hook" || b != "/sink" {
		t.Errorf("the endpoint saw %s and %s", a, b)
	}
}

// A secret's variable that is not set fails Apply, naming the variable;
// a name the program already offers is refused; neither repeats a secret.
func TestApplyHookSecrets(t *testing.T) {
	t.Setenv("KEEL_TEST_AUDIT_SECRET", "")
	t.Setenv("KEEL_TEST_GATE_SECRET", "gate-secret-value")
	t.Setenv("KEEL_TEST_SINK_SECRET", "sink-secret-value")
	yaml := strings.ReplaceAll(hooksYAML, "URL", "http://127.0.0.1:9")
	cfg, err := config.Parse("keel.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	opts := worker.Options{Workspace: t.TempDir()}
	err = cfg.Apply(&opts)
	want := "keel.yaml:5:17: hooks.audit.secret_env: the environment variable KEEL_TEST_AUDIT_SECRET is not set"
	if err == nil || err.Error() != want {
		t.Fatalf("Apply: %v\nwant %s", err, want)
	}
	if opts.Hooks != nil || opts.Sinks != nil {
		t.Errorf("a failed Apply set hooks %v, sinks %v", opts.Hooks, opts.Sinks)
	}

	t.Setenv("KEEL_TEST_AUDIT_SECRET", "audit-secret-value")
	noop := hook.Func(hook.Spec{Points: []keel.HookPoint{keel.HookRunEnd}}, nil)
	opts = worker.Options{Workspace: t.TempDir(), Hooks: map[string]hook.Hook{"gate": noop}}
	err = cfg.Apply(&opts)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Field != "hooks.gate" || !strings.Contains(ce.Msg, "offers a hook named \"gate\" already") {
		t.Fatalf("Apply beside a program's gate: %v", err)
	}
	if len(opts.Hooks) != 1 {
		t.Errorf("a failed Apply changed the program's hooks: %v", opts.Hooks)
	}
	for _, s := range []string{"audit-secret-value", "gate-secret-value", "sink-secret-value", "hooks.example.com"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q repeats %q", err, s)
		}
	}
}

// Bad hooks and sinks are refused when the file is loaded, each at its
// place, never repeating a secret.
func TestHooksRefused(t *testing.T) {
	const ok = "    url: https://h.example.com/\n    secret_env: S\n"
	for _, tc := range []struct{ name, yaml, want, secret string }{
		{"plain http elsewhere", "hooks:\n  a:\n    url: http://h.example.com/\n    secret_env: S\n    points: [run_end]\n",
			"bad.yaml:3:10: hooks.a.url: want https, or http to localhost or a loopback IP", ""},
		{"credentials", "sinks:\n  a:\n    url: https://me:hunter2@h.example.com/\n    secret_env: S\n",
			"bad.yaml:3:10: sinks.a.url: must not hold credentials", "hunter2"},
		{"literal secret", "hooks:\n  a:\n" + ok + "    points: [run_end]\n    secret: whsec-0123456789\n",
			"bad.yaml:6:5: hooks.a.secret: keys and secrets never go in the configuration file", "whsec-0123456789"},
		{"secret pasted as the variable", "sinks:\n  a:\n    url: https://h.example.com/\n    secret_env: whsec-0123456789\n",
			"bad.yaml:4:17: sinks.a.secret_env: want the name of an environment variable", "whsec-0123456789"},
		{"no url", "hooks:\n  a:\n    secret_env: S\n    points: [run_end]\n", "bad.yaml:2:3: hooks.a.url: required", ""},
		{"no secret_env", "sinks:\n  a:\n    url: https://h.example.com/\n", "bad.yaml:2:3: sinks.a.secret_env: required", ""},
		{"no points", "hooks:\n  a:\n" + ok, "bad.yaml:2:3: hooks.a.points: required", ""},
		{"no point", "hooks:\n  a:\n" + ok + "    points: []\n", "bad.yaml:5:13: hooks.a.points: is empty", ""},
		{"unknown point", "hooks:\n  a:\n" + ok + "    points: [run_end, after_step]\n",
			`bad.yaml:5:23: hooks.a.points[1]: unknown point "after_step" (known: run_start, before_step, before_tool, after_tool, before_commit, run_end)`, ""},
		{"point twice", "hooks:\n  a:\n" + ok + "    points: [run_end, run_end]\n", `hooks.a.points[1]: "run_end" is listed twice`, ""},
		{"long timeout", "hooks:\n  a:\n" + ok + "    points: [run_end]\n    timeout: 6m\n", "bad.yaml:6:14: hooks.a.timeout: want a duration up to 5m0s", ""},
		{"zero timeout", "sinks:\n  a:\n" + ok + "    timeout: 0s\n", "sinks.a.timeout: want a duration up to 5m0s", ""},
		{"bad on_error", "hooks:\n  a:\n" + ok + "    points: [run_end]\n    on_error: ignore\n", `hooks.a.on_error: unknown policy "ignore": use fail or continue`, ""},
		{"bad name", "hooks:\n  9audit:\n" + ok + "    points: [run_end]\n", "bad.yaml:2:3: hooks.9audit: a name is 1 to 32 letters", ""},
		{"points on a sink", "sinks:\n  a:\n" + ok + "    points: [run_end]\n", "bad.yaml:5:5: sinks.a.points: unknown field (known: secret_env, timeout, url)", ""},
		{"agent names no hook", "agents:\n  a:\n    hooks: [audit]\n", `bad.yaml:3:12: agents.a.hooks: no hook named "audit" in this file`, ""},
		{"agent names a sink", "sinks:\n  audit:\n" + ok + "agents:\n  a:\n    hooks: [audit]\n", `agents.a.hooks: no hook named "audit"`, ""},
		{"agent names a hook twice", "hooks:\n  h:\n" + ok + "    points: [run_end]\nagents:\n  a:\n    hooks: [h, h]\n", `agents.a.hooks: "h" is listed twice`, ""},
		{"agent names too many", "agents:\n  a:\n    hooks: [a, b, c, d, e, f, g, h, i]\n", "agents.a.hooks: at most 8 hooks, not 9", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("bad.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %q", err, tc.want)
			}
			if tc.secret != "" && strings.Contains(err.Error(), tc.secret) {
				t.Errorf("error %q repeats the secret", err)
			}
		})
	}
	loopback := "hooks:\n  a:\n    url: http://localhost:8080/keel\n    secret_env: S\n    points: [run_end]\n" +
		"sinks:\n  b:\n    url: http://[::1]:9/\n    secret_env: S\n"
	if _, err := config.Parse("ok.yaml", []byte(loopback)); err != nil {
		t.Errorf("plain http to this machine: %v", err)
	}
}
