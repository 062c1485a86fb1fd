package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/provider"
)

func usageChunk(u keel.Usage) provider.Chunk { return provider.Chunk{Usage: &u} }

func genChunk(kind string, n int64) provider.Chunk {
	return provider.Chunk{Generation: &keel.GenerationTokens{Kind: kind, N: n}}
}

func callChunk(index int, id, name, args string) provider.Chunk {
	return provider.Chunk{ToolCall: &provider.ToolCallDelta{Index: index, ID: id, Name: name, Arguments: args}}
}

var noGeneration = keel.GenerationTokens{Kind: keel.GenerationNone}

func TestStreamFixtures(t *testing.T) {
	tests := []struct {
		fixture       string
		wantChunks    []provider.Chunk
		wantResp      *provider.Response
		wantMalformed bool
	}{
		{
			// Usage from message_start (input with cache) and message_delta
			// (output); ping events are skipped.
			fixture: "text.sse",
			wantChunks: []provider.Chunk{
				usageChunk(keel.Usage{InputTokens: 525, OutputTokens: 1, CacheReadTokens: 400, CacheWriteTokens: 100}),
				{Text: "Hello"}, {Text: ", world!"}, {Finish: provider.FinishStop},
				usageChunk(keel.Usage{InputTokens: 525, OutputTokens: 12, CacheReadTokens: 400, CacheWriteTokens: 100}),
			},
			wantResp: &provider.Response{Text: "Hello, world!", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 525, OutputTokens: 12, CacheReadTokens: 400, CacheWriteTokens: 100, Requests: 1},
				Generation: noGeneration},
		},
		{
			fixture: "tool_use.sse",
			wantChunks: []provider.Chunk{
				usageChunk(keel.Usage{InputTokens: 300, OutputTokens: 2}),
				{Text: "Checking both."},
				callChunk(0, "toolu_paris", "get_weather", ""),
				callChunk(0, "", "", `{"ci`),
				callChunk(0, "", "", `ty": "Par`),
				callChunk(0, "", "", `is"}`),
				callChunk(1, "toolu_rome", "get_weather", ""),
				callChunk(1, "", "", `{"city": "Ro`),
				callChunk(1, "", "", `me"}`),
				{Finish: provider.FinishToolCalls},
				usageChunk(keel.Usage{InputTokens: 300, OutputTokens: 70}),
			},
			wantResp: &provider.Response{
				Text: "Checking both.",
				ToolCalls: []keel.ToolCall{
					{ID: "toolu_paris", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)},
					{ID: "toolu_rome", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Rome"}`)},
				},
				Finish:     provider.FinishToolCalls,
				Usage:      keel.Usage{InputTokens: 300, OutputTokens: 70, Requests: 1},
				Generation: noGeneration,
			},
		},
		{
			// Streamed thinking: all 90 output tokens fall in the window.
			fixture: "thinking.sse",
			wantChunks: []provider.Chunk{
				usageChunk(keel.Usage{InputTokens: 40, OutputTokens: 3}),
				{Reasoning: "27 * 453: "}, {Reasoning: "27*400 + 27*53."}, {Text: "12231"},
				{Finish: provider.FinishStop},
				usageChunk(keel.Usage{InputTokens: 40, OutputTokens: 90, ReasoningTokens: 80}),
				genChunk(keel.GenerationReported, 90),
			},
			wantResp: &provider.Response{Text: "12231", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 40, OutputTokens: 90, ReasoningTokens: 80, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 90}},
		},
		{
			// Thinking that never streamed: its 100 tokens precede the window.
			fixture: "hidden_thinking.sse",
			wantResp: &provider.Response{Text: "Yes.", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 40, OutputTokens: 120, ReasoningTokens: 100, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 20}},
		},
		{
			// Redacted thinking without a token split: no usable count.
			fixture: "redacted.sse",
			wantResp: &provider.Response{Text: "Done.", Finish: provider.FinishLength,
				Usage:      keel.Usage{InputTokens: 40, OutputTokens: 50, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationUnavailable}},
		},
		{
			// Text in content_block_start itself; refusal maps to content_filter.
			fixture: "refusal.sse",
			wantResp: &provider.Response{Text: "I can't help with that.", Finish: provider.FinishContentFilter,
				Usage: keel.Usage{InputTokens: 10, OutputTokens: 6, Requests: 1}, Generation: noGeneration},
		},
		{
			// Tool input sent whole in content_block_start, without deltas.
			fixture: "start_input.sse",
			wantResp: &provider.Response{
				ToolCalls: []keel.ToolCall{{ID: "toolu_whole", Name: "read_file", Arguments: json.RawMessage(`{"path":"notes.txt"}`)}},
				Finish:    provider.FinishToolCalls,
				Usage:     keel.Usage{InputTokens: 10, OutputTokens: 20, Requests: 1}, Generation: noGeneration,
			},
		},
		{
			// The stop reason arrived; losing message_stop does not throw the
			// answer away.
			fixture: "stop_then_cut.sse",
			wantResp: &provider.Response{Text: "Complete.", Finish: provider.FinishStop,
				Usage: keel.Usage{InputTokens: 10, OutputTokens: 3, Requests: 1}, Generation: noGeneration},
		},
		{fixture: "no_stop_reason.sse", wantMalformed: true},
		{fixture: "malformed_tool.sse", wantMalformed: true},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := newServer(t, sseFixture(t, tt.fixture))
			chunks, err := collect(t, newProvider(t, srv.URL).Stream(context.Background(), simpleRequest))
			if err != nil {
				t.Fatalf("stream error: %v", err)
			}
			if tt.wantChunks != nil {
				if diff := cmp.Diff(tt.wantChunks, chunks); diff != "" {
					t.Errorf("chunks (-want +got):\n%s", diff)
				}
			}
			resp, err := assemble(chunks).Response()
			var mal *provider.MalformedError
			if tt.wantMalformed {
				if !errors.As(err, &mal) {
					t.Fatalf("Response() error = %v, want *provider.MalformedError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Response() error = %v", err)
			}
			if diff := cmp.Diff(*tt.wantResp, resp); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			if n := srv.requests.Load(); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}
}

func TestStreamFailures(t *testing.T) {
	tests := []struct {
		fixture     string
		wantKind    keel.ProviderErrorKind
		retryable   bool
		wantMsg     string
		wantPartial string
	}{
		{fixture: "cut.sse", wantKind: keel.ProviderStreamCut, retryable: true, wantPartial: "The answer is"},
		{fixture: "ended_early.sse", wantKind: keel.ProviderStreamCut, retryable: true, wantPartial: "The answer"},
		{fixture: "error_overloaded.sse", wantKind: keel.ProviderOverloaded, retryable: true, wantMsg: "Overloaded (overloaded_error)", wantPartial: "Partial"},
		{fixture: "error_api.sse", wantKind: keel.ProviderServer, retryable: true, wantMsg: "Internal server error"},
		{fixture: "error_invalid.sse", wantKind: keel.ProviderInvalidRequest, wantMsg: "prompt is too long"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			srv := newServer(t, sseFixture(t, tt.fixture))
			chunks, err := collect(t, newProvider(t, srv.URL).Stream(context.Background(), simpleRequest))
			var pe *keel.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("stream error = %T %v, want *keel.ProviderError", err, err)
			}
			got := keel.ProviderError{Provider: pe.Provider, Kind: pe.Kind, Status: pe.Status, Retryable: pe.Retryable}
			want := keel.ProviderError{Provider: "anthropic", Kind: tt.wantKind, Retryable: tt.retryable}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if pe.Message == "" || (tt.wantMsg != "" && pe.Message != tt.wantMsg && !contains([]byte(pe.Message), tt.wantMsg)) {
				t.Errorf("message = %q, want it to contain %q", pe.Message, tt.wantMsg)
			}
			if got := assemble(chunks).Text(); got != tt.wantPartial {
				t.Errorf("partial text = %q, want %q", got, tt.wantPartial)
			}
		})
	}

	t.Run("bad_event.sse", func(t *testing.T) {
		srv := newServer(t, sseFixture(t, "bad_event.sse"))
		_, err := collect(t, newProvider(t, srv.URL).Stream(context.Background(), simpleRequest))
		var mal *provider.MalformedError
		if !errors.As(err, &mal) {
			t.Fatalf("stream error = %T %v, want *provider.MalformedError", err, err)
		}
	})
}
