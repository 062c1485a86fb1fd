package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/providertest"
)

func mustParse(t *testing.T, src string) *Script {
	t.Helper()
	s, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

// play streams one request and assembles what came before any error.
func play(t *testing.T, s *Script, req provider.Request) (provider.Response, error) {
	t.Helper()
	chunks, err := providertest.Collect(t, New(s).Stream(context.Background(), req))
	if err != nil {
		return provider.Response{}, err
	}
	return providertest.Assemble(chunks).Response()
}

// after returns a request for the turn that follows n completed turns.
func after(n, attempt int) provider.Request {
	msgs := []keel.Message{keel.UserMessage("go")}
	for range n {
		msgs = append(msgs, keel.Message{Role: keel.RoleAssistant, Content: "done"})
	}
	return provider.Request{Model: "m", Messages: msgs, Attempt: attempt}
}

func TestParseRejectsBadScripts(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"not JSON", `{"turns":`, "parse script"},
		{"unknown field", `{"turns":[{"text":["hi"]}],"temperature":1}`, `unknown field "temperature"`},
		{"no turns", `{"turns":[]}`, "no turns"},
		{"empty turn", `{"turns":[{"text":["a"]},{"usage":{"input_tokens":1}}]}`, "turn 2 has neither text nor tool calls"},
		{"nameless call", `{"turns":[{"tool_calls":[{"id":"c","arguments":{}}]}]}`, "turn 1, tool call 1 has no name"},
		{"unknown failure", `{"turns":[{"failures":[{"kind":"gremlins"}],"text":["a"]}]}`, `unknown kind "gremlins"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error = %v, want one that says %q", err, tt.want)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broken.json")
	if err := os.WriteFile(path, []byte(`{"turns":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Load error = %v, want it to name %s", err, path)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of a missing file = %v, want os.ErrNotExist", err)
	}
}

// Every script shown in docs/scripted.md parses, and the demo only calls
// the tools it declares.
func TestDocumentedScriptsParse(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "scripted.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("docs/scripted.md shows no JSON script")
	}
	for i, b := range blocks {
		if !strings.Contains(string(b[1]), `"turns"`) {
			continue // a fragment, not a whole script
		}
		if _, err := Parse(b[1]); err != nil {
			t.Errorf("script %d of docs/scripted.md: %v", i+1, err)
		}
	}
	for i, turn := range Demo().Turns {
		for _, c := range turn.ToolCalls {
			if !strings.Contains(strings.Join(DemoTools, " "), c.Name) {
				t.Errorf("demo turn %d calls %q, not in DemoTools %v", i+1, c.Name, DemoTools)
			}
		}
	}
}

func TestStreamPlaysTurnsInOrder(t *testing.T) {
	s := mustParse(t, `{"turns":[
	  {"reasoning":["hmm"],"text":["Look", "ing"],"tool_calls":[{"id":"c1","name":"read_file","arguments":{"path":"a.txt"}}],
	   "usage":{"input_tokens":10,"output_tokens":3}},
	  {"text":["Done."],"usage":{"input_tokens":20,"output_tokens":2},"generation":{"kind":"reported","n":2}}]}`)

	first, err := play(t, s, after(0, 1))
	if err != nil {
		t.Fatal(err)
	}
	want := provider.Response{
		Text:       "Looking",
		ToolCalls:  []keel.ToolCall{{ID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`)}},
		Finish:     provider.FinishToolCalls,
		Usage:      keel.Usage{InputTokens: 10, OutputTokens: 3, Requests: 1},
		Generation: keel.GenerationTokens{Kind: keel.GenerationNone},
	}
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("turn 1 (-want +got):\n%s", diff)
	}

	second, err := play(t, s, after(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if second.Text != "Done." || second.Finish != provider.FinishStop ||
		second.Generation != (keel.GenerationTokens{Kind: keel.GenerationReported, N: 2}) {
		t.Errorf("turn 2 = %+v", second)
	}

	// Past the end without repeat: a permanent error that says so.
	_, err = play(t, s, after(2, 1))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderInvalidRequest || pe.Retryable || !strings.Contains(pe.Message, "turn 3") {
		t.Fatalf("turn 3 of 2 = %v, want a permanent invalid_request naming turn 3", err)
	}
}

// An aborted assistant message (a cancelled turn) is not a completed turn;
// a compaction summary counts the turns it stands for.
func TestTurnIndex(t *testing.T) {
	msgs := []keel.Message{
		{Role: keel.RoleUser, Content: "summary", CompactedTurns: 3},
		{Role: keel.RoleAssistant, Content: "a"},
		{Role: keel.RoleAssistant, Content: "cut", Aborted: true},
		{Role: keel.RoleTool, Content: "r"},
	}
	if got := TurnIndex(provider.Request{Messages: msgs}); got != 4 {
		t.Fatalf("TurnIndex = %d, want 4", got)
	}
}

func TestRepeatCycles(t *testing.T) {
	s := mustParse(t, `{"repeat":true,"turns":[{"text":["one"]},{"text":["two"]}]}`)
	var got []string
	for n := range 5 {
		r, err := play(t, s, after(n, 1))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Text)
	}
	if diff := cmp.Diff([]string{"one", "two", "one", "two", "one"}, got); diff != "" {
		t.Errorf("texts (-want +got):\n%s", diff)
	}
}

// Failures strike the attempts they are listed for, then the turn
// succeeds.
func TestInjectedProviderErrors(t *testing.T) {
	s := mustParse(t, `{"turns":[{"failures":[
	    {"kind":"rate_limited","status":429,"retry_after":"3s"},
	    {"kind":"auth","status":401,"message":"bad key"}],
	  "text":["ok"]}]}`)
	_, err := play(t, s, after(0, 1))
	var pe *keel.ProviderError
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderRateLimited || !pe.Retryable || pe.Status != 429 ||
		pe.RetryAfter.Std() != 3*time.Second || pe.Message != "injected rate_limited" {
		t.Fatalf("attempt 1 = %#v, want retryable rate_limited after 3s", err)
	}
	_, err = play(t, s, after(0, 2))
	if !errors.As(err, &pe) || pe.Kind != keel.ProviderAuth || pe.Retryable || pe.Message != "bad key" {
		t.Fatalf("attempt 2 = %#v, want permanent auth", err)
	}
	if r, err := play(t, s, after(0, 3)); err != nil || r.Text != "ok" {
		t.Fatalf("attempt 3 = %+v, %v; want the turn", r, err)
	}
}

func TestStreamFaults(t *testing.T) {
	turn := `"text":["a","b","c"],"tool_calls":[{"id":"c","name":"t","arguments":{"k":"v"}}],"usage":{"input_tokens":5,"output_tokens":5}`
	t.Run("malformed", func(t *testing.T) {
		s := mustParse(t, `{"turns":[{"failures":[{"kind":"malformed","usage":{"input_tokens":5,"output_tokens":1}}],`+turn+`}]}`)
		chunks, err := providertest.Collect(t, New(s).Stream(context.Background(), after(0, 1)))
		if err != nil {
			t.Fatal(err)
		}
		a := providertest.Assemble(chunks)
		var me *provider.MalformedError
		if _, err := a.Response(); !errors.As(err, &me) {
			t.Fatalf("assembled = %v, want a MalformedError", err)
		}
		if u := a.Usage(); u.OutputTokens != 1 {
			t.Errorf("usage of the malformed attempt = %+v, want the failure's own", u)
		}
	})
	t.Run("empty", func(t *testing.T) {
		s := mustParse(t, `{"turns":[{"failures":[{"kind":"empty"}],`+turn+`}]}`)
		var me *provider.MalformedError
		if _, err := play(t, s, after(0, 1)); !errors.As(err, &me) {
			t.Fatalf("empty attempt = %v, want a MalformedError", err)
		}
	})
	t.Run("no finish", func(t *testing.T) {
		s := mustParse(t, `{"turns":[{"failures":[{"kind":"no_finish"}],`+turn+`}]}`)
		chunks, err := providertest.Collect(t, New(s).Stream(context.Background(), after(0, 1)))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range chunks {
			if c.Finish != "" {
				t.Fatalf("chunk %+v carries a finish reason", c)
			}
		}
		var me *provider.MalformedError
		if _, err := providertest.Assemble(chunks).Response(); !errors.As(err, &me) {
			t.Fatalf("assembled = %v, want a MalformedError", err)
		}
	})
	t.Run("stream cut", func(t *testing.T) {
		s := mustParse(t, `{"turns":[{"failures":[{"kind":"stream_cut","after_chunks":2}],`+turn+`}]}`)
		chunks, err := providertest.Collect(t, New(s).Stream(context.Background(), after(0, 1)))
		var pe *keel.ProviderError
		if !errors.As(err, &pe) || pe.Kind != keel.ProviderStreamCut || !pe.Retryable {
			t.Fatalf("error = %v, want a retryable stream_cut", err)
		}
		if diff := cmp.Diff([]provider.Chunk{{Text: "a"}, {Text: "b"}}, chunks); diff != "" {
			t.Errorf("chunks before the cut (-want +got):\n%s", diff)
		}
	})
	t.Run("hang until cancelled", func(t *testing.T) {
		s := mustParse(t, `{"turns":[{"failures":[{"kind":"hang","after_chunks":1}],`+turn+`}]}`)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var got []provider.Chunk
		var failure error
		for c, err := range New(s).Stream(ctx, after(0, 1)) {
			if err != nil {
				failure = err
				continue
			}
			got = append(got, c)
			cancel() // the stream now hangs until this lands
		}
		if !errors.Is(failure, context.Canceled) || len(got) != 1 {
			t.Fatalf("got %d chunks and %v, want 1 chunk then context.Canceled", len(got), failure)
		}
	})
}

// A chunk delay is honoured, and cancellation cuts it short.
func TestChunkDelayStopsOnCancel(t *testing.T) {
	s := mustParse(t, `{"chunk_delay":"1h","turns":[{"text":["never"]}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	chunks, err := providertest.Collect(t, New(s).Stream(ctx, after(0, 1)))
	if !errors.Is(err, context.Canceled) || len(chunks) != 0 {
		t.Fatalf("got %v, %v; want no chunk and context.Canceled", chunks, err)
	}
}

func TestCompactionSummary(t *testing.T) {
	s := mustParse(t, `{"turns":[{"text":["unused"]}]}`)
	req := after(2, 1)
	req.Compaction = true
	r, err := play(t, s, req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Text, "3 earlier messages (2 turns)") || r.Finish != provider.FinishStop {
		t.Fatalf("summary = %+v", r)
	}
}
