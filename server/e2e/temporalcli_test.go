package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	commonpb "go.temporal.io/api/common/v1"
	querypb "go.temporal.io/api/query/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/api"
	"github.com/keelrun/keel/client"
	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// The tests below drive keel the way the `temporal` CLI does, to hold the
// promise that `temporal workflow query/signal` just work
// (docs/foreign-clients.md):
// cliPayloads built from JSON text with encoding json/plain, sent with the
// raw WorkflowService calls (SignalWorkflowExecution, QueryWorkflow) the
// CLI makes, never the SDK's typed helpers or data converter; answers read
// as the JSON text of the result payload. The real CLI does not build from
// the module proxy alone (its module replaces a nested module the proxy
// does not serve), so by default TestTemporalCLIScript runs
// scripts/temporal-cli.sh against a stand-in with the same flags, wire
// calls and printed output: TestHelperTemporalCLI, this test binary
// re-executed. With KEEL_TEMPORAL_CLI naming a real temporal binary it runs
// against that instead.

// cliJSONPlain is the encoding the temporal CLI gives --input payloads.
const cliJSONPlain = "json/plain"

// cliWire makes the temporal CLI's calls.
type cliWire struct {
	svc       workflowservice.WorkflowServiceClient
	namespace string
}

// cliPayloads is what `--input JSON` becomes: one payload per input, the JSON
// text as its data, refused when it is not JSON (as the CLI refuses it).
func cliPayloads(inputs []string) (*commonpb.Payloads, error) {
	if len(inputs) == 0 {
		return nil, nil
	}
	out := &commonpb.Payloads{}
	for i, in := range inputs {
		if !json.Valid([]byte(in)) {
			return nil, fmt.Errorf("input #%d is not valid JSON", i+1)
		}
		out.Payloads = append(out.Payloads, &commonpb.Payload{
			Metadata: map[string][]byte{"encoding": []byte(cliJSONPlain)},
			Data:     []byte(in),
		})
	}
	return out, nil
}

// query is `temporal workflow query --workflow-id ID --type NAME [--input
// JSON]`; it returns the answer's JSON text.
func (w cliWire) query(ctx context.Context, workflowID, queryType string, input ...string) (string, error) {
	args, err := cliPayloads(input)
	if err != nil {
		return "", err
	}
	resp, err := w.svc.QueryWorkflow(ctx, &workflowservice.QueryWorkflowRequest{
		Namespace: w.namespace,
		Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID},
		Query:     &querypb.WorkflowQuery{QueryType: queryType, QueryArgs: args},
	})
	if err != nil {
		return "", fmt.Errorf("querying workflow failed: %w", err)
	}
	if resp.GetQueryRejected() != nil {
		return "", fmt.Errorf("query was rejected, workflow has status: %v", resp.GetQueryRejected().GetStatus())
	}
	res := resp.GetQueryResult().GetPayloads()
	if len(res) != 1 {
		return "", fmt.Errorf("query %s answered %d cliPayloads, want 1", queryType, len(res))
	}
	// The CLI and the Web UI show json/plain answers as JSON; anything
	// else (binary, protobuf) would reach an operator as base64.
	if enc := string(res[0].GetMetadata()["encoding"]); enc != cliJSONPlain {
		return "", fmt.Errorf("query %s answered with encoding %q, want %s", queryType, enc, cliJSONPlain)
	}
	return string(res[0].GetData()), nil
}

// signal is `temporal workflow signal --workflow-id ID --name NAME
// [--input JSON]`.
func (w cliWire) signal(ctx context.Context, workflowID, name string, input ...string) error {
	args, err := cliPayloads(input)
	if err != nil {
		return err
	}
	_, err = w.svc.SignalWorkflowExecution(ctx, &workflowservice.SignalWorkflowExecutionRequest{
		Namespace:         w.namespace,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: workflowID},
		SignalName:        name,
		Input:             args,
		Identity:          "temporalcli-test",
	})
	if err != nil {
		return fmt.Errorf("failed signalling workflow: %w", err)
	}
	return nil
}

// cliQuery makes a query as the CLI does and reads its JSON answer into a
// T, failing the test otherwise.
func cliQuery[T any](t *testing.T, ctx context.Context, w cliWire, workflowID, queryType string, input ...string) T {
	t.Helper()
	text, err := w.query(ctx, workflowID, queryType, input...)
	if err != nil {
		t.Fatal(err)
	}
	return cliParse[T](t, text)
}

// cliParse reads JSON text into a T, failing the test otherwise.
func cliParse[T any](t *testing.T, text string) T {
	t.Helper()
	var out T
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("answer is not a %T: %v\n%s", out, err, text)
	}
	return out
}

// cliStack is a server, a keel worker, a keel client (to send prompts and
// watch runs) and the wire, each on its own connection.
type cliStack struct {
	srv    *devserver.Server
	book   *keeltest.ScriptBook
	client *client.Client
	wire   cliWire
}

func newCLIStack(t *testing.T) *cliStack {
	t.Helper()
	srv := keeltest.StartServer(t, devserver.Config{})
	book := &keeltest.ScriptBook{}
	keeltest.StartWorker(t, srv, keeltest.WorkerOptions{Models: book})
	return &cliStack{
		srv: srv, book: book, client: keeltest.Client(t, srv, nil),
		wire: cliWire{svc: keeltest.Dial(t, srv).WorkflowService(), namespace: srv.Namespace()},
	}
}

// send starts a run of script in session with tools.
func (s *cliStack) send(t *testing.T, ctx context.Context, session, script string, tools ...string) (*client.Run, *cliEventCursor) {
	t.Helper()
	spec := s.book.Add(t, session+fmt.Sprint(time.Now().UnixNano()), script)
	run, err := s.client.Session(session).Send(ctx, "Pick a color.", client.WithConfig(api.RunConfig{Model: spec, Tools: tools}))
	if err != nil {
		t.Fatal(err)
	}
	return run, newCLIEventCursor(t, ctx, run)
}

// cliEventCursor reads a run's durable events on demand, so a test waits for
// the event that says a signal was handled instead of waiting for time.
type cliEventCursor struct {
	t    *testing.T
	next func() (keel.Envelope, error, bool)
	seen []keel.Envelope
}

func newCLIEventCursor(t *testing.T, ctx context.Context, run *client.Run) *cliEventCursor {
	next, stop := iter.Pull2(run.Events(ctx))
	t.Cleanup(stop)
	return &cliEventCursor{t: t, next: next}
}

// until reads events up to and including the first of type typ.
func (c *cliEventCursor) until(typ string) keel.Envelope {
	c.t.Helper()
	for {
		env, err, ok := c.next()
		if !ok {
			c.t.Fatalf("the run's events ended before %s; seen: %v", typ, types(c.seen))
		}
		if err != nil {
			c.t.Fatalf("events: %v", err)
		}
		c.seen = append(c.seen, env)
		if env.Type == typ {
			return env
		}
	}
}

// cliInOrder reports whether want occurs in got in this order, not
// necessarily adjacent.
func cliInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

const cliAskScript = `{"turns":[
  {"tool_calls":[{"id":"q","name":"ask_user","arguments":{"question":"Which color?"}}]},
  {"text":["Noted."]}]}`

const cliNapScript = `{"turns":[
  {"tool_calls":[{"id":"z","name":"sleep","arguments":{"seconds":3600}}]},
  {"text":["woke"]}]}`

// TestTemporalCLIWire steers a run, answers its ask_user request, cancels
// another, and reads state, events and history, all as the temporal CLI
// does on the wire.
func TestTemporalCLIWire(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := newCLIStack(t)
	w := s.wire

	t.Run("steer_and_respond", func(t *testing.T) {
		run, events := s.send(t, ctx, "cli-wire", cliAskScript, "ask_user")
		events.until(keel.TypeHostInputRequested)

		// The run executes in the session's own workflow: the session's
		// state holds the run's, and the commands go to the session. There
		// is no workflow S/run-1.
		runState := func() api.RunStatus {
			t.Helper()
			ss := cliQuery[api.SessionStatus](t, ctx, w, "cli-wire", "state")
			if ss.ActiveRun == nil || ss.ActiveRun.RunID != run.ID || ss.Run == nil || ss.Run.RunID != run.ID {
				t.Fatalf("session state: %+v", ss)
			}
			return *ss.Run
		}
		ss := cliQuery[api.SessionStatus](t, ctx, w, "cli-wire", "state")
		if ss.State != keel.StateWaitingForHostInput {
			t.Fatalf("session state: %+v", ss)
		}
		rs := runState()
		if rs.State != keel.StateWaitingForHostInput || len(rs.Requests) != 1 || rs.Requests[0].Prompt != "Which color?" {
			t.Fatalf("run state: %+v", rs)
		}
		reqID := rs.Requests[0].RequestID
		var nf *serviceerror.NotFound
		if _, err := w.query(ctx, run.ID, "state"); !errors.As(err, &nf) {
			t.Fatalf("query of %s: %v, want NotFound (no Run workflow)", run.ID, err)
		}

		// A signal cannot report an error: an answer to an unknown request
		// is dropped. The steer after it is handled in the same workflow
		// task or a later one, so once it is accepted the bad answer has
		// been seen too, and must have changed nothing.
		if err := w.signal(ctx, "cli-wire", "respond", `{"request_id":"nope","answer":"x"}`); err != nil {
			t.Fatal(err)
		}
		if err := w.signal(ctx, "cli-wire", "steer", fmt.Sprintf(`{"text":"Prefer blue.","run_id":%q}`, run.ID)); err != nil {
			t.Fatal(err)
		}
		accepted, err := events.until(keel.TypeSteeringAccepted).Event()
		if err != nil {
			t.Fatal(err)
		}
		steer := accepted.(keel.SteeringAccepted)
		if steer.Text != "Prefer blue." {
			t.Errorf("steering accepted with text %q", steer.Text)
		}
		rs = runState()
		if len(rs.Requests) != 1 || rs.Requests[0].RequestID != reqID || len(rs.Staged) != 1 || rs.Staged[0] != steer.SteeringID {
			t.Fatalf("run state after the dropped answer and the steer: %+v", rs)
		}

		if err := w.signal(ctx, "cli-wire", "respond", fmt.Sprintf(`{"request_id":%q,"answer":"green"}`, reqID)); err != nil {
			t.Fatal(err)
		}
		events.until(keel.TypeRunCompleted)
		out, err := run.Outcome(ctx)
		if err != nil || out.Status != keel.StatusCompleted || out.Text != "Noted." {
			t.Fatalf("outcome %+v, %v", out, err)
		}

		// The session's log, read as the CLI reads it, is the one the SDK
		// streamed: dense from 1, the same events, in an order that shows
		// each signal's effect.
		page := cliQuery[api.EventsPage](t, ctx, w, "cli-wire", "events", `{"after":0}`)
		if diff := cmp.Diff(cliSeqTypes(events.seen), cliSeqTypes(page.Events)); diff != "" {
			t.Errorf("events query vs the SDK's stream (-sdk +query):\n%s", diff)
		}
		for i, e := range page.Events {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d: %v", i, e.Seq, cliSeqTypes(page.Events))
			}
		}
		want := []string{keel.TypeRunStarted, keel.TypeHostInputRequested, keel.TypeSteeringAccepted,
			keel.TypeHostInputResolved, keel.TypeToolFinished, keel.TypeSteeringApplied, keel.TypeRunCompleted}
		if got := types(page.Events); !cliInOrder(got, want) {
			t.Errorf("events %v do not contain %v in order", got, want)
		}

		hist := cliQuery[api.HistoryPage](t, ctx, w, "cli-wire", "history", `{"offset":0}`)
		type msg struct{ Role, Content, ToolCallID, SteeringID string }
		var got []msg
		for _, m := range hist.Messages {
			got = append(got, msg{string(m.Role), m.Content, m.ToolCallID, m.SteeringID})
		}
		wantMsgs := []msg{
			{"user", "Pick a color.", "", ""},
			{"assistant", "", "", ""},
			{"tool", "green", "q", ""},
			{"user", "Prefer blue.", "", steer.SteeringID},
			{"assistant", "Noted.", "", ""},
		}
		if diff := cmp.Diff(wantMsgs, got); diff != "" {
			t.Errorf("history (-want +got):\n%s", diff)
		}
		if hist.Total != len(wantMsgs) || hist.Revision != 1 {
			t.Errorf("history page: total %d, revision %d; want %d, 1", hist.Total, hist.Revision, len(wantMsgs))
		}
	})

	t.Run("cancel", func(t *testing.T) {
		run, events := s.send(t, ctx, "cli-cancel", cliNapScript, "sleep")
		events.until(keel.TypeToolStarted)
		// `temporal workflow signal --workflow-id S --name cancel` sends
		// no input at all: the session cancels its active run, which
		// executes in the session's workflow (an inline session).
		if err := w.signal(ctx, "cli-cancel", "cancel"); err != nil {
			t.Fatal(err)
		}
		events.until(keel.TypeRunCancelled)
		if _, err := run.Outcome(ctx); !errors.Is(err, keel.ErrCancelled) {
			t.Fatalf("outcome: %v, want cancelled", err)
		}
		ss := cliQuery[api.SessionStatus](t, ctx, w, "cli-cancel", "state")
		if ss.ActiveRun != nil || ss.Last == nil || ss.Last.Status != keel.StatusCancelled || ss.Revision != 1 {
			t.Errorf("session state after the cancel: %+v", ss)
		}
		page := cliQuery[api.EventsPage](t, ctx, w, "cli-cancel", "events", `{"after":0}`)
		want := []string{keel.TypeRunStarted, keel.TypeToolStarted, keel.TypeToolFinished, keel.TypeRunCancelled}
		if got := types(page.Events); !cliInOrder(got, want) || got[len(got)-1] != keel.TypeRunCancelled {
			t.Errorf("events %v: want %v in order, ending with the cancel", got, want)
		}
		// There is no Run workflow to signal: the CLI's signal to
		// S/run-1 fails, loudly.
		var nf *serviceerror.NotFound
		if err := w.signal(ctx, run.ID, "cancel"); !errors.As(err, &nf) {
			t.Errorf("cancel signal to %s: %v, want NotFound", run.ID, err)
		}
		// A late cancel naming the ended run reaches the session, which
		// takes it, and never the run after it.
		if err := w.signal(ctx, "cli-cancel", "cancel", fmt.Sprintf(`{"run_id":%q}`, run.ID)); err != nil {
			t.Fatal(err)
		}
		// (The script's turns count the session's transcript: run 1's
		// assistant turn is the first.)
		spec := s.book.Add(t, "cli-cancel-next", `{"turns":[{"text":["run 1's"]},{"text":["still here"]}]}`)
		next, err := s.client.Session("cli-cancel").Send(ctx, "Again.", client.WithConfig(api.RunConfig{Model: spec}))
		if err != nil {
			t.Fatal(err)
		}
		if out, err := next.Outcome(ctx); err != nil || out.Text != "still here" {
			t.Errorf("run 2 after a late cancel of run 1: %+v, %v", out, err)
		}
	})

	t.Run("bad_input", func(t *testing.T) {
		// The CLI refuses --input that is not JSON before calling.
		if err := w.signal(ctx, "cli-wire/run-1", "steer", `{"text":`); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
			t.Errorf("signal with broken JSON: %v", err)
		}
		var nf *serviceerror.NotFound
		if _, err := w.query(ctx, "no-such-session", "state"); !errors.As(err, &nf) {
			t.Errorf("query of a missing session: %v, want NotFound", err)
		}
	})
}

type cliSeqType struct {
	Seq  int64
	Type string
}

func cliSeqTypes(envs []keel.Envelope) []cliSeqType {
	out := make([]cliSeqType, len(envs))
	for i, e := range envs {
		out[i] = cliSeqType{e.Seq, e.Type}
	}
	return out
}

// cliQueryHeader is what the temporal CLI prints before a query's answer
// in its default text output; the answer follows as JSON on one line.
const cliQueryHeader = "Query result:\n  QueryResult  "

// cliAnswer reads the JSON answer out of the CLI's printed query result.
func cliAnswer[T any](t *testing.T, printed string) T {
	t.Helper()
	text, ok := strings.CutPrefix(printed, cliQueryHeader)
	if !ok {
		t.Fatalf("not a query result as the temporal CLI prints one:\n%s", printed)
	}
	return cliParse[T](t, text)
}

// envTemporalStandIn makes TestHelperTemporalCLI act as the temporal CLI.
const envTemporalStandIn = "KEEL_TEST_TEMPORAL_STAND_IN"

// TestHelperTemporalCLI is not a test: re-executed by TestTemporalCLIScript
// as `temporal` (through a wrapper script), it runs one `temporal workflow
// query` or `temporal workflow signal` with the real CLI's flags and wire
// calls, prints what it got as the real CLI does (a query's JSON answer on
// one line, after the CLI's header) and exits.
func TestHelperTemporalCLI(t *testing.T) {
	if os.Getenv(envTemporalStandIn) != "1" {
		t.Skip("run by TestTemporalCLIScript as a stand-in for the temporal CLI")
	}
	if err := temporalStandIn(context.Background(), flag.Args(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "temporal:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// temporalStandIn runs `workflow query|signal` with the flags of the real
// CLI that scripts/temporal-cli.sh uses.
func temporalStandIn(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) < 2 || args[0] != "workflow" || (args[1] != "query" && args[1] != "signal") {
		return fmt.Errorf("stand-in knows only `workflow query` and `workflow signal`, got %q", args)
	}
	fs := flag.NewFlagSet("temporal workflow "+args[1], flag.ContinueOnError)
	address := fs.String("address", "localhost:7233", "")
	namespace := fs.String("namespace", "default", "")
	workflowID := fs.String("workflow-id", "", "")
	var name string
	fs.StringVar(&name, "name", "", "")
	fs.StringVar(&name, "type", "", "") // query's alias of --name
	var inputs []string
	fs.Func("input", "", func(s string) error { inputs = append(inputs, s); return nil })
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	if *workflowID == "" || name == "" || fs.NArg() > 0 {
		return fmt.Errorf("want --workflow-id and --name/--type, and no arguments: %q", args)
	}
	c, err := sdkclient.DialContext(ctx, sdkclient.Options{HostPort: *address, Namespace: *namespace})
	if err != nil {
		return err
	}
	defer c.Close()
	w := cliWire{svc: c.WorkflowService(), namespace: *namespace}
	if args[1] == "query" {
		answer, err := w.query(ctx, *workflowID, name, inputs...)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, cliQueryHeader+"%s\n", answer)
		return err
	}
	if err := w.signal(ctx, *workflowID, name, inputs...); err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, "Signal workflow succeeded")
	return err
}

// TestTemporalCLIScript runs scripts/temporal-cli.sh, with the stand-in
// (or KEEL_TEMPORAL_CLI) as its temporal CLI, to steer and answer one run, cancel another through
// the session, and read state, events and history.
func TestTemporalCLIScript(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s := newCLIStack(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// KEEL_TEMPORAL_CLI naming a real temporal binary runs the script
	// against it; otherwise against the stand-in, which answers as the
	// real one does (checked that way with temporal v1.8.2).
	wrapper := os.Getenv("KEEL_TEMPORAL_CLI")
	if wrapper == "" {
		wrapper = filepath.Join(t.TempDir(), "temporal")
		if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec \"$KEEL_TEST_BINARY\" -test.run='^TestHelperTemporalCLI$' -- \"$@\"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	scriptPath, err := filepath.Abs(filepath.Join("..", "..", "scripts", "temporal-cli.sh"))
	if err != nil {
		t.Fatal(err)
	}
	conn := []string{"--address", s.srv.Address(), "--namespace", s.srv.Namespace()}
	script := func(t *testing.T, wantCode int, args ...string) (stdout, stderr string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, scriptPath, append(conn, args...)...)
		cmd.Env = append(os.Environ(), "KEEL_TEMPORAL_CLI="+wrapper, "KEEL_TEST_BINARY="+exe, envTemporalStandIn+"=1")
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != wantCode {
			t.Fatalf("temporal-cli.sh %q: exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, wantCode, o.String(), e.String())
		}
		return o.String(), e.String()
	}
	prefix := "+ temporal workflow %s --address " + s.srv.Address() + " --namespace " + s.srv.Namespace() + " --workflow-id "

	run, events := s.send(t, ctx, "cli-script", cliAskScript, "ask_user")
	events.until(keel.TypeHostInputRequested)

	// The run executes in the session's own workflow (an inline session):
	// every command goes to the session, and the session's state holds
	// the active run's.
	out, errOut := script(t, 0, "state", "cli-script")
	if want := fmt.Sprintf(prefix, "query") + "cli-script --type state\n"; errOut != want {
		t.Errorf("state printed %q, want %q", errOut, want)
	}
	ss := cliAnswer[api.SessionStatus](t, out)
	if ss.Run == nil || ss.Run.RunID != run.ID || len(ss.Run.Requests) != 1 {
		t.Fatalf("session state: %+v", ss)
	}
	reqID := ss.Run.Requests[0].RequestID

	// Quotes, a backslash and a newline must survive the script's JSON.
	text := "Prefer \"blue\" \\ or\nthen green."
	out, errOut = script(t, 0, "steer", "cli-script", "--run", "1", text)
	if out != "Signal workflow succeeded\n" || !strings.HasPrefix(errOut, fmt.Sprintf(prefix, "signal")+"cli-script --name steer --input '{\"text\":") ||
		!strings.HasSuffix(errOut, `,"run_id":"cli-script/run-1"}'`+"\n") {
		t.Errorf("steer: stdout %q, stderr %q", out, errOut)
	}
	accepted, err := events.until(keel.TypeSteeringAccepted).Event()
	if err != nil {
		t.Fatal(err)
	}
	if got := accepted.(keel.SteeringAccepted).Text; got != text {
		t.Errorf("steering text %q, want %q", got, text)
	}

	script(t, 0, "respond", "cli-script", "--run", "1", reqID, "--string", "green, of course")
	events.until(keel.TypeRunCompleted)
	if _, err := run.Outcome(ctx); err != nil {
		t.Fatal(err)
	}

	out, _ = script(t, 0, "events", "cli-script", "--after", "0", "--limit", "3")
	page := cliAnswer[api.EventsPage](t, out)
	if got := cliSeqTypes(page.Events); len(got) != 3 || got[0] != (cliSeqType{1, keel.TypeRunStarted}) || got[2].Seq != 3 || !page.More {
		t.Errorf("events --after 0 --limit 3: %v, more %v", got, page.More)
	}
	out, _ = script(t, 0, "history", "cli-script")
	hist := cliAnswer[api.HistoryPage](t, out)
	var contents []string
	for _, m := range hist.Messages {
		contents = append(contents, m.Content)
	}
	if diff := cmp.Diff([]string{"Pick a color.", "", "green, of course", text, "Noted."}, contents); diff != "" {
		t.Errorf("history contents (-want +got):\n%s", diff)
	}

	// Cancel through the session: it cancels its active run.
	run2, events2 := s.send(t, ctx, "cli-script-2", cliNapScript, "sleep")
	events2.until(keel.TypeToolStarted)
	out, errOut = script(t, 0, "cancel", "cli-script-2")
	if want := fmt.Sprintf(prefix, "signal") + "cli-script-2 --name cancel\n"; out != "Signal workflow succeeded\n" || errOut != want {
		t.Errorf("cancel: stdout %q, stderr %q, want %q", out, errOut, want)
	}
	events2.until(keel.TypeRunCancelled)
	if _, err := run2.Outcome(ctx); !errors.Is(err, keel.ErrCancelled) {
		t.Fatalf("outcome of run 2: %v, want cancelled", err)
	}
	out, _ = script(t, 0, "state", "cli-script-2")
	if ss := cliAnswer[api.SessionStatus](t, out); ss.Runs != 1 || ss.Last == nil || ss.Last.Status != keel.StatusCancelled {
		t.Errorf("session state: %+v", ss)
	}

	// --dry-run prints and calls nothing; usage errors exit 64.
	out, errOut = script(t, 0, "--dry-run", "cancel", "cli-script", "--run", "2")
	if want := fmt.Sprintf(prefix, "signal") + "cli-script --name cancel --input '{\"run_id\":\"cli-script/run-2\"}'\n"; out != "" || errOut != want {
		t.Errorf("dry run: stdout %q, stderr %q, want %q", out, errOut, want)
	}
	script(t, 64, "steer", "cli-script", "no run number")
	script(t, 64, "respond", "cli-script", "--run", "1", reqID)
	script(t, 64, "state", "cli-script", "--run", "1")
}
