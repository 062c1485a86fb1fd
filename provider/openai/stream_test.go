package openai

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
		fixture string
		// wantChunks, when set, is the exact chunk sequence.
		wantChunks []provider.Chunk
		// wantResp is the assembled response of a stream without error.
		wantResp *provider.Response
		// wantMalformed says assembling must fail with a MalformedError.
		wantMalformed bool
	}{
		{
			fixture: "text.sse",
			wantChunks: []provider.Chunk{
				{Text: "Hello"}, {Text: ", world"}, {Text: "!"}, {Finish: provider.FinishStop},
				usageChunk(keel.Usage{InputTokens: 25, OutputTokens: 4, CacheReadTokens: 16}),
				genChunk(keel.GenerationReported, 4),
			},
			wantResp: &provider.Response{Text: "Hello, world!", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 25, OutputTokens: 4, CacheReadTokens: 16, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 4}},
		},
		{
			fixture: "tool_calls.sse",
			wantChunks: []provider.Chunk{
				callChunk(0, "call_paris", "get_weather", ""),
				callChunk(0, "", "", `{"ci`),
				callChunk(0, "", "", `ty": "Par`),
				callChunk(1, "call_rome", "get_weather", ""),
				callChunk(0, "", "", `is"}`),
				callChunk(1, "", "", `{"city": "Ro`),
				callChunk(1, "", "", `me"}`),
				{Finish: provider.FinishToolCalls},
				usageChunk(keel.Usage{InputTokens: 80, OutputTokens: 40}),
				genChunk(keel.GenerationReported, 40),
			},
			wantResp: &provider.Response{
				ToolCalls: []keel.ToolCall{
					{ID: "call_paris", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)},
					{ID: "call_rome", Name: "get_weather", Arguments: json.RawMessage(`{"city": "Rome"}`)},
				},
				Finish:     provider.FinishToolCalls,
				Usage:      keel.Usage{InputTokens: 80, OutputTokens: 40, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 40},
			},
		},
		{
			// DeepSeek: reasoning_content deltas, usage on the finish chunk,
			// cache hits in prompt_cache_hit_tokens. The reasoning was
			// streamed, so all 30 completion tokens are in the window.
			fixture: "reasoning_content.sse",
			wantChunks: []provider.Chunk{
				{Reasoning: "9.11 vs 9.8: "}, {Reasoning: "compare tenths."}, {Text: "9.8 is greater."},
				{Finish: provider.FinishStop},
				usageChunk(keel.Usage{InputTokens: 12, OutputTokens: 30, CacheReadTokens: 8, ReasoningTokens: 24}),
				genChunk(keel.GenerationReported, 30),
			},
			wantResp: &provider.Response{Text: "9.8 is greater.", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 12, OutputTokens: 30, CacheReadTokens: 8, ReasoningTokens: 24, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 30}},
		},
		{
			// vLLM/Ollama "reasoning" field; no token breakdown, so no
			// generation count.
			fixture: "reasoning_field.sse",
			wantChunks: []provider.Chunk{
				{Reasoning: "Thinking"}, {Reasoning: " hard."}, {Text: "Done."}, {Finish: provider.FinishLength},
				usageChunk(keel.Usage{InputTokens: 5, OutputTokens: 7}),
			},
			wantResp: &provider.Response{Text: "Done.", Finish: provider.FinishLength,
				Usage: keel.Usage{InputTokens: 5, OutputTokens: 7, Requests: 1}, Generation: noGeneration},
		},
		{
			// Hidden reasoning (OpenAI o-series): 128 of 130 completion tokens
			// were generated before the first visible delta.
			fixture: "hidden_reasoning.sse",
			wantResp: &provider.Response{Text: "42", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 20, OutputTokens: 130, ReasoningTokens: 128, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 2}},
		},
		{
			// Servers that send whole tool calls without "index".
			fixture: "no_index_tools.sse",
			wantResp: &provider.Response{
				ToolCalls: []keel.ToolCall{
					{ID: "call_a", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.txt"}`)},
					{ID: "call_b", Name: "read_file", Arguments: json.RawMessage(`{"path":"b.txt"}`)},
				},
				Finish: provider.FinishToolCalls,
				Usage:  keel.Usage{InputTokens: 50, OutputTokens: 20, Requests: 1}, Generation: noGeneration,
			},
		},
		{
			// SSE comments are skipped; a refusal is shown as text.
			fixture:    "keepalive.sse",
			wantChunks: []provider.Chunk{{Text: "Hi"}, {Text: " (refused)"}, {Finish: provider.FinishContentFilter}},
		},
		{
			// The finish reason arrived; losing the usage chunk and [DONE]
			// after it does not throw the answer away.
			fixture: "finish_then_cut.sse",
			wantResp: &provider.Response{Text: "Complete.", Finish: provider.FinishStop,
				Usage: keel.Usage{Requests: 1}, Generation: noGeneration},
		},
		{fixture: "no_finish.sse", wantMalformed: true},
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
			if tt.wantResp != nil {
				if diff := cmp.Diff(*tt.wantResp, resp); diff != "" {
					t.Errorf("response (-want +got):\n%s", diff)
				}
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
		wantStatus  int
		retryable   bool
		wantPartial string
	}{
		// The connection drops mid-response.
		{fixture: "cut.sse", wantKind: keel.ProviderStreamCut, retryable: true, wantPartial: "The answer is"},
		// The body ends cleanly but without a finish reason or [DONE].
		{fixture: "ended_early.sse", wantKind: keel.ProviderStreamCut, retryable: true, wantPartial: "The answer"},
		// OpenAI's in-stream error object.
		{fixture: "stream_error.sse", wantKind: keel.ProviderServer, retryable: true, wantPartial: "Partial"},
		// vLLM's error event, carrying an HTTP status.
		{fixture: "stream_error_event.sse", wantKind: keel.ProviderInvalidRequest, wantStatus: 400, wantPartial: "Partial"},
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
			want := keel.ProviderError{Provider: "openai", Kind: tt.wantKind, Status: tt.wantStatus, Retryable: tt.retryable}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if pe.Message == "" {
				t.Error("error has no message")
			}
			if got := assemble(chunks).Text(); got != tt.wantPartial {
				t.Errorf("partial text = %q, want %q", got, tt.wantPartial)
			}
		})
	}

	t.Run("bad_chunk.sse", func(t *testing.T) {
		srv := newServer(t, sseFixture(t, "bad_chunk.sse"))
		chunks, err := collect(t, newProvider(t, srv.URL).Stream(context.Background(), simpleRequest))
		var mal *provider.MalformedError
		if !errors.As(err, &mal) {
			t.Fatalf("stream error = %T %v, want *provider.MalformedError", err, err)
		}
		if diff := cmp.Diff([]provider.Chunk{{Text: "ok"}}, chunks); diff != "" {
			t.Errorf("chunks before the error (-want +got):\n%s", diff)
		}
	})
}
