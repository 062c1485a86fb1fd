package openai

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/providertest"
)

var noGeneration = keel.GenerationTokens{Kind: keel.GenerationNone}

func TestStreamFixtures(t *testing.T) {
	providertest.CheckStreams(t, subject, []providertest.Stream{
		{
			Fixture: "text.sse",
			Chunks: []provider.Chunk{
				{Text: "Hello"}, {Text: ", world"}, {Text: "!"}, {Finish: provider.FinishStop},
				providertest.UsageChunk(keel.Usage{InputTokens: 25, OutputTokens: 4, CacheReadTokens: 16}),
				providertest.GenerationChunk(keel.GenerationReported, 4),
			},
			Response: &provider.Response{Text: "Hello, world!", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 25, OutputTokens: 4, CacheReadTokens: 16, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 4}},
		},
		{
			Fixture: "tool_calls.sse",
			Chunks: []provider.Chunk{
				providertest.ToolCallChunk(0, "call_paris", "get_weather", ""),
				providertest.ToolCallChunk(0, "", "", `{"ci`),
				providertest.ToolCallChunk(0, "", "", `ty": "Par`),
				providertest.ToolCallChunk(1, "call_rome", "get_weather", ""),
				providertest.ToolCallChunk(0, "", "", `is"}`),
				providertest.ToolCallChunk(1, "", "", `{"city": "Ro`),
				providertest.ToolCallChunk(1, "", "", `me"}`),
				{Finish: provider.FinishToolCalls},
				providertest.UsageChunk(keel.Usage{InputTokens: 80, OutputTokens: 40}),
				providertest.GenerationChunk(keel.GenerationReported, 40),
			},
			Response: &provider.Response{
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
			Fixture: "reasoning_content.sse",
			Chunks: []provider.Chunk{
				{Reasoning: "9.11 vs 9.8: "}, {Reasoning: "compare tenths."}, {Text: "9.8 is greater."},
				{Finish: provider.FinishStop},
				providertest.UsageChunk(keel.Usage{InputTokens: 12, OutputTokens: 30, CacheReadTokens: 8, ReasoningTokens: 24}),
				providertest.GenerationChunk(keel.GenerationReported, 30),
			},
			Response: &provider.Response{Text: "9.8 is greater.", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 12, OutputTokens: 30, CacheReadTokens: 8, ReasoningTokens: 24, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 30}},
		},
		{
			// vLLM/Ollama "reasoning" field; no token breakdown, so no
			// generation count.
			Fixture: "reasoning_field.sse",
			Chunks: []provider.Chunk{
				{Reasoning: "Thinking"}, {Reasoning: " hard."}, {Text: "Done."}, {Finish: provider.FinishLength},
				providertest.UsageChunk(keel.Usage{InputTokens: 5, OutputTokens: 7}),
			},
			Response: &provider.Response{Text: "Done.", Finish: provider.FinishLength,
				Usage: keel.Usage{InputTokens: 5, OutputTokens: 7, Requests: 1}, Generation: noGeneration},
		},
		{
			// Hidden reasoning (OpenAI o-series): 128 of 130 completion tokens
			// were generated before the first visible delta.
			Fixture: "hidden_reasoning.sse",
			Response: &provider.Response{Text: "42", Finish: provider.FinishStop,
				Usage:      keel.Usage{InputTokens: 20, OutputTokens: 130, ReasoningTokens: 128, Requests: 1},
				Generation: keel.GenerationTokens{Kind: keel.GenerationReported, N: 2}},
		},
		{
			// Servers that send whole tool calls without "index".
			Fixture: "no_index_tools.sse",
			Response: &provider.Response{
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
			Fixture: "keepalive.sse",
			Chunks:  []provider.Chunk{{Text: "Hi"}, {Text: " (refused)"}, {Finish: provider.FinishContentFilter}},
		},
		{
			// The finish reason arrived; losing the usage chunk and [DONE]
			// after it does not throw the answer away.
			Fixture: "finish_then_cut.sse",
			Response: &provider.Response{Text: "Complete.", Finish: provider.FinishStop,
				Usage: keel.Usage{Requests: 1}, Generation: noGeneration},
		},
		{Fixture: "no_finish.sse", Malformed: true},
		{Fixture: "malformed_tool.sse", Malformed: true},
	})
}

func TestStreamFailures(t *testing.T) {
	providertest.CheckStreamFailures(t, subject, []providertest.StreamFailure{
		// The connection drops mid-response.
		{Fixture: "cut.sse", Kind: keel.ProviderStreamCut, Retryable: true, Partial: "The answer is"},
		// The body ends cleanly but without a finish reason or [DONE].
		{Fixture: "ended_early.sse", Kind: keel.ProviderStreamCut, Retryable: true, Partial: "The answer"},
		// OpenAI's in-stream error object.
		{Fixture: "stream_error.sse", Kind: keel.ProviderServer, Retryable: true, Partial: "Partial"},
		// vLLM's error event, carrying an HTTP status.
		{Fixture: "stream_error_event.sse", Kind: keel.ProviderInvalidRequest, Status: 400, Partial: "Partial"},
	})

	t.Run("bad_chunk.sse", func(t *testing.T) {
		srv := providertest.NewServer(t, providertest.SSE(t, "testdata/bad_chunk.sse"))
		chunks, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), subject.Request))
		var mal *provider.MalformedError
		if !errors.As(err, &mal) {
			t.Fatalf("stream error = %T %v, want *provider.MalformedError", err, err)
		}
		if diff := cmp.Diff([]provider.Chunk{{Text: "ok"}}, chunks); diff != "" {
			t.Errorf("chunks before the error (-want +got):\n%s", diff)
		}
	})
}
